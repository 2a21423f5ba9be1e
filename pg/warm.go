package pg

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// A backend's first call of a function compiles it, and of each of its
// statements plans it; pgx's first use of a statement on a connection
// prepares it, one more round trip. On the paths where time counts (a
// waiter's evaluate on its wake-up, a holder's leave, a watchdog's end of
// a dead term) that first time is made ahead, in a transaction rolled
// back, on rows made for the purpose under a name of their own: nothing
// of it is seen by others, not the rows, not the notifications.

func (l *Locker) endSessionSQL() string { return "SELECT " + l.q + ".end_session($1)" }
func (l *Locker) leaveSQL() string      { return "SELECT " + l.q + ".leave($1, $2)" }
func (l *Locker) evaluateSQL() string {
	return "SELECT state, epoch, granted, blocker, blocker_live, wait_s FROM " + l.q + ".evaluate($1, $2)"
}

// lingerSQL reads the seconds left on the lease of session $1 if it lives,
// its connection is gone (its advisory lock can be had, as conn_gone
// tells; $3 is the schema) and it has no waiting request of name $2
// (acquirer.lingering); no row otherwise. It locks no row.
func (l *Locker) lingerSQL() string {
	return "SELECT extract(epoch FROM s.expires_at - clock_timestamp())::float8 FROM " + l.q + ".sessions s " +
		"WHERE s.id = $1 AND s.expires_at > clock_timestamp() AND NOT EXISTS (SELECT 1 FROM " + l.q +
		".requests r WHERE r.session_id = s.id AND r.name = $2 AND r.epoch IS NULL)" +
		" AND pg_try_advisory_xact_lock_shared(hashtext($3), (s.id % 2147483647)::int)"
}

// warmName is a name no one else uses, for the rows of a warm-up.
func (l *Locker) warmName() string {
	return fmt.Sprintf("leaderrun warm-up %s %d %x", l.host, os.Getpid(), time.Now().UnixNano())
}

// warmRequest makes, in tx, a request of name, granted (epoch 1) or
// waiting, in session sid, or in a new session whose backend is this one
// for sid 0, and returns its ticket and session.
func (l *Locker) warmRequest(ctx context.Context, tx pgx.Tx, name string, granted bool, sid int64) (int64, int64, error) {
	var ticket int64
	err := tx.QueryRow(ctx, `WITH s AS (INSERT INTO `+l.q+`.sessions (expires_at, ttl, host, pid, backend_pid)
			SELECT clock_timestamp() + interval '1 hour', '1 hour', $2, 0, pg_backend_pid() WHERE $4 = 0 RETURNING id)
		INSERT INTO `+l.q+`.requests (name, session_id, exclusive, steal, chan, key, pid, host, uid, command, labels, since, epoch, granted)
			SELECT $1, id, true, false, 'leaderrun_warm_up', '', 0, $2, 0, '{}', '{}', clock_timestamp(),
				CASE WHEN $3 THEN 1 END, CASE WHEN $3 THEN clock_timestamp() END
			FROM (SELECT id FROM s UNION ALL SELECT $4::bigint WHERE $4 <> 0) i
		RETURNING ticket, session_id`, name, l.host, granted, sid).Scan(&ticket, &sid)
	return ticket, sid, err
}

// warmEnd readies c's backend for end_session: in a transaction rolled
// back, it ends a session made for the purpose, with a request granted of
// a name of its own and one waiting behind it in another session, so
// that the statement is prepared (pgx caches it) and every function the
// end calls, with the plans of their statements, compiled and cached (the
// waiter's connection is not live, so it is told to wake; the grant's
// statements are planned by granting it then). Nothing of it is seen by
// others: not the rows, not the notifications. The end is then one round
// trip on a backend that has done it before.
func (l *Locker) warmEnd(ctx context.Context, c *pgx.Conn) error {
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	name := l.warmName()
	_, sid, err := l.warmRequest(ctx, tx, name, true, 0)
	if err != nil {
		return err
	}
	waiter, _, err := l.warmRequest(ctx, tx, name, false, 0)
	if err != nil {
		return err
	}
	if _, err = tx.Exec(ctx, l.endSessionSQL(), sid); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "SELECT "+l.q+".grant_request(r) FROM "+l.q+".requests r WHERE ticket = $1", waiter)
	return err
}

// warmSession readies the session connection c for a waiter's evaluate
// (the wait on a live holder, then the grant), its read of a holder whose
// connection went (lingering), and a holder's leave that
// hands the name to a waiter of its own session.
func (l *Locker) warmSession(ctx context.Context, c *pgx.Conn) error {
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	name := l.warmName()
	held, hsid, err := l.warmRequest(ctx, tx, name, true, 0)
	if err != nil {
		return err
	}
	var left float64 // the read of a holder whose connection went
	if err := tx.QueryRow(ctx, l.lingerSQL(), hsid, name, l.schema).Scan(&left); err != nil {
		return err
	}
	ticket, sid, err := l.warmRequest(ctx, tx, name, false, 0)
	if err != nil {
		return err
	}
	next, _, err := l.warmRequest(ctx, tx, name, false, sid)
	if err != nil {
		return err
	}
	var v verdict
	scan := func() error {
		return tx.QueryRow(ctx, l.evaluateSQL(), ticket, sid).Scan(&v.state, &v.epoch, &v.granted, &v.blocker, &v.blockerLive, &v.waitS)
	}
	if err := scan(); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "DELETE FROM "+l.q+".requests WHERE ticket = $1", held); err != nil {
		return err
	}
	if err := scan(); err != nil {
		return err
	}
	// Hands the name to next, of the same session.
	if _, err = tx.Exec(ctx, l.leaveSQL(), ticket, sid); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, l.leaveSQL(), next, sid)
	return err
}

// warmEnds opens the Locker's connection for ends of sessions (withEnds)
// and readies it for end_session (warmEnd), once, in the background: a
// waiter that sees the holder on its own host die ends its term on it
// (EndHolder) in one round trip, not after a connection's start-up and
// authentication. A failure costs only that first end's time.
func (l *Locker) warmEnds() {
	l.endsReady.Do(func() {
		go func() {
			ctx, cancel := context.WithTimeout(l.closing, 10*time.Second)
			defer cancel()
			l.withEnds(ctx, func(c *pgx.Conn) error { return l.warmEnd(ctx, c) })
		}()
	})
}

// warm readies the session's connection (warmSession), once; a failure
// costs only the first calls' time.
func (s *session) warm() {
	s.warmed.Do(func() {
		go s.do(func(ctx context.Context, c *pgx.Conn) error {
			return s.l.warmSession(ctx, c)
		})
	})
}
