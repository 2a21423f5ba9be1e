package pg

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// deathWatch sleeps, on a connection of its own, on the advisory lock that
// another session's connection holds for its life, and closes gone when
// that connection has ended (the process died, the server ended the
// backend for idleness, pg_terminate_backend, a restart). That is only a
// wake-up: a granted request of that session still holds until its lease
// expires by the server's clock, since its holder may not know yet.
type deathWatch struct {
	refs   int
	gone   chan struct{}
	cancel context.CancelFunc
}

func (w *deathWatch) stop() { w.cancel() }

// watchDeath returns a channel closed when session sid's connection is
// gone, and a function to call when that is no longer of interest.
// Waiters of one Locker blocked by one session share one watch.
func (l *Locker) watchDeath(sid int64) (<-chan struct{}, func()) {
	l.watchMu.Lock()
	defer l.watchMu.Unlock()
	w := l.watchers[sid]
	if w == nil {
		ctx, cancel := context.WithCancel(l.closing)
		w = &deathWatch{gone: make(chan struct{}), cancel: cancel}
		l.watchers[sid] = w
		go l.sleepOn(ctx, sid, w)
	}
	w.refs++
	return w.gone, func() {
		l.watchMu.Lock()
		defer l.watchMu.Unlock()
		w.refs--
		if w.refs == 0 {
			w.cancel()
			if l.watchers[sid] == w {
				delete(l.watchers, sid)
			}
		}
	}
}

func (l *Locker) sleepOn(ctx context.Context, sid int64, w *deathWatch) {
	defer func() {
		l.watchMu.Lock()
		if l.watchers[sid] == w {
			delete(l.watchers, sid)
		}
		l.watchMu.Unlock()
		close(w.gone)
	}()
	c, err := l.watchConn(ctx)
	if err == nil {
		// Held by the statement only: the implicit transaction ends with it.
		_, err = c.Exec(ctx, "SELECT pg_advisory_xact_lock_shared(hashtext($1), ($2::bigint % 2147483647)::int)", l.schema, sid)
		if err == nil {
			l.keepSpare(c)
		} else {
			c.Close(context.Background())
		}
	}
	if err != nil && ctx.Err() == nil {
		// Could not watch (the server is restarting, no connection slot
		// left): the waiter looks again after a pause rather than at once.
		t := time.NewTimer(200 * time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// spareIdle is how long the connection of a watch that has fired is kept
// for the next watch (keepSpare), unless a test says otherwise
// (Locker.spareIdle).
const spareIdle = time.Second

// watchConn is the spare watch connection if there is one, else a new one.
func (l *Locker) watchConn(ctx context.Context) (*pgx.Conn, error) {
	if c := l.takeSpare(); c != nil {
		return c, nil
	}
	return l.connect(ctx, "watch", map[string]string{"statement_timeout": "0", "lock_timeout": "0", "idle_session_timeout": "0"})
}

// takeSpare takes the spare watch connection (keepSpare), if it is open:
// idle, out of any transaction, with no statement or lock timeout.
func (l *Locker) takeSpare() *pgx.Conn {
	l.watchMu.Lock()
	c := l.spare
	l.spare = nil
	l.watchMu.Unlock()
	if c != nil && c.IsClosed() {
		return nil
	}
	return c
}

// keepSpare keeps c, a watch connection whose blocker's connection has
// just gone, for the next watch, and closes it once it has been idle for
// spareIdle. Not closing it at once matters: a backend's exit costs the
// server milliseconds of processor time, and the end of a holder's
// connection is the very moment its watchdog ends its term and its
// successor starts (BenchmarkCLIFailover); a waiter whose blocker changes
// (the one ahead of it went) connects no more for its next watch.
func (l *Locker) keepSpare(c *pgx.Conn) {
	l.watchMu.Lock()
	defer l.watchMu.Unlock()
	if l.closing.Err() != nil || l.spare != nil {
		go c.Close(context.Background())
		return
	}
	l.spare = c
	time.AfterFunc(l.spareIdle, func() {
		l.watchMu.Lock()
		idle := l.spare == c
		if idle {
			l.spare = nil
		}
		l.watchMu.Unlock()
		if idle {
			c.Close(context.Background())
		}
	})
}
