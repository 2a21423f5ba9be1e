package pg

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrPooler: the session's statements reached another server backend
// than the one that opened it, as behind a transaction-mode pooler
// (PgBouncer's pool_mode=transaction), which cannot carry a session's
// advisory lock, LISTEN or connection lifetime.
var ErrPooler = errors.New("pg: the session's statements reach different server backends: a transaction-mode pooler is in front; connect to PostgreSQL itself or to a session-mode pool")

// pgErr says what the Locker was doing when err happened; nil stays nil.
func (l *Locker) pgErr(doing string, err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "LR001" {
		return fmt.Errorf("%w (%s)", ErrPooler, pe.Message)
	}
	return fmt.Errorf("pg: %s: %w", doing, err)
}

// isConnErr reports whether err is a failure to reach or stay connected
// to the server, rather than an answer from it.
func isConnErr(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:2] {
		case "08", "57": // connection exception, operator intervention (shutdown, terminated)
			return true
		}
		return pe.Code == "53300" // too many connections
	}
	// The connection broke under a statement: the server went (a
	// restart, a crash) or the network did.
	var ne net.Error
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.As(err, &ne) {
		return true
	}
	return pgconn.Timeout(err) || pgconn.SafeToRetry(err)
}
