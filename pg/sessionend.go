package pg

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// SessionEnd ends one session from another process than the session's
// own (leaderrun's watchdog) in one round trip, over a connection opened
// ahead, while the session's terms run: connecting and authenticating
// (SCRAM, TLS) then costs nothing when the session must end.
type SessionEnd struct {
	l      *Locker
	id     int64
	ready  chan struct{} // closed once c is open and warm, or could not be
	c      *pgx.Conn     // nil if it could not be opened
	cancel context.CancelFunc
}

// preparedWait bounds the end over the connection opened ahead: past
// it (a half-open connection, a server that went away), End ends the
// session on a fresh connection.
const preparedWait = time.Second

// PrepareEndSession opens, in the background, a connection on which End
// will end session id as EndSession does. The connection asks for no
// idle_session_timeout; should the server end it all the same (its own
// or a role's timeout, pg_terminate_backend, a restart, a pooler), fail
// to answer within a second, or not be open yet, End ends the session on
// a fresh connection instead: a stale preparation never fails the end.
// Close frees the connection.
func (l *Locker) PrepareEndSession(id int64) *SessionEnd {
	ctx, cancel := context.WithCancel(l.closing)
	e := &SessionEnd{l: l, id: id, ready: make(chan struct{}), cancel: cancel}
	go e.open(ctx)
	return e
}

func (e *SessionEnd) open(ctx context.Context) {
	defer close(e.ready)
	// An end lost in a crash of the server leaves the session to its
	// lease, which is safe: no wait for the WAL flush
	// (synchronous_commit=off), unless the end hands the name on, whose
	// grant must survive a crash (hand sets it on for that transaction).
	c, err := e.l.connect(ctx, "end", map[string]string{
		"idle_session_timeout": "0",
		"synchronous_commit":   "off",
		"statement_timeout":    ms(10 * time.Second),
		"lock_timeout":         ms(5 * time.Second),
	})
	if err != nil {
		return
	}
	if err := e.l.warmEnd(ctx, c); err != nil {
		c.Close(context.Background())
		return
	}
	e.c = c
}

// End ends the session: over the connection opened ahead if it is open
// and answers, else on a fresh connection (Locker.EndSession).
func (e *SessionEnd) End(ctx context.Context) error {
	select {
	case <-e.ready:
		if e.c != nil && !e.c.IsClosed() {
			pctx, cancel := context.WithTimeout(ctx, preparedWait)
			_, err := e.c.Exec(pctx, e.l.endSessionSQL(), e.id)
			cancel()
			if err == nil {
				return nil
			}
			// end_session is idempotent: whether or not the server
			// ran it, running it again is right.
		}
	default:
		// Still connecting: as fast to start again, and bounded.
	}
	return e.l.EndSession(ctx, e.id)
}

// Close closes the connection opened ahead, or stops its opening.
func (e *SessionEnd) Close() {
	e.cancel()
	<-e.ready
	if e.c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		e.c.Close(ctx)
		cancel()
	}
}
