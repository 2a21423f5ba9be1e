package pg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/remote"
)

// session is a Locker's lease: a row of the sessions table whose expiry
// the server sets by its own clock at each renewal, and the one connection
// that made it and holds its advisory lock. Every grant and release of the
// session runs on that connection; when it is lost, so is the session (no
// other connection may act for it, so a waiting request of a session
// whose connection is gone can never be granted, and others pass it at
// once).
//
// The loop renews the lease and keeps a deadline: the send time of the
// last acknowledged renewal plus the TTL, less the margin. The server set
// the expiry to its clock at the renewal, which is after the send, plus
// the TTL, so every term of the session ends, by this process's monotonic
// clock, margin before the lease can expire and anyone else can be
// granted, whatever the network or the server does.
type session struct {
	l       *Locker
	id      int64
	ttl     time.Duration
	ctx     context.Context // ends with the session, its cause why
	cancel  context.CancelCauseFunc
	done    <-chan struct{}
	stopped chan struct{} // closed once the loop is over

	cmu  sync.Mutex // one statement at a time on conn
	conn *pgx.Conn

	once    sync.Once
	warmed  sync.Once
	err     error
	revoked sync.Once
	remote.Deadline
}

// session returns the Locker's live session, opening one when there is
// none (the first request, or the last session was lost).
func (l *Locker) session(ctx context.Context) (*session, error) {
	l.mu.Lock()
	s := l.sess
	l.mu.Unlock()
	if s != nil && s.alive() {
		return s, nil
	}
	l.grantMu.Lock()
	defer l.grantMu.Unlock()
	l.mu.Lock()
	s = l.sess
	l.mu.Unlock()
	if s != nil && s.alive() {
		return s, nil
	}
	if _, err := l.listener(ctx); err != nil {
		return nil, err
	}
	conn, id, sent, err := l.openSession(ctx)
	if err != nil {
		return nil, err
	}
	s = &session{l: l, id: id, ttl: l.ttl, conn: conn, stopped: make(chan struct{})}
	s.Start(sent.Add(l.ttl - l.margin))
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.done = s.ctx.Done()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		s.end(elect.ErrClosed, true)
		return nil, elect.ErrClosed
	}
	l.sess = s
	l.mu.Unlock()
	go s.loop()
	return s, nil
}

// openSession connects the session's connection, makes its row and
// checks that a second transaction reaches the same backend; sent is when
// the row's lease was asked for.
func (l *Locker) openSession(ctx context.Context) (conn *pgx.Conn, id int64, sent time.Time, err error) {
	// The server ends a connection that stays idle for a TTL: the loop
	// renews three times as often, so only a session whose process
	// stopped or whose host died or was cut off is ended, and its
	// advisory lock, which its waiters sleep on, is let go.
	conn, err = l.connect(ctx, "session", map[string]string{
		"idle_session_timeout": ms(l.ttl),
		// A renewal or grant acknowledged must survive a crash of the
		// server: with synchronous_commit off (a server's default may
		// say so), a crash loses the last commits, and a lease would
		// expire earlier than its holder was told.
		"synchronous_commit":                  "on",
		"idle_in_transaction_session_timeout": ms(l.ttl),
		"statement_timeout":                   ms(max(time.Second, (l.ttl-l.margin)/3)),
		"lock_timeout":                        ms(max(time.Second, (l.ttl-l.margin)/3)),
	})
	if err != nil {
		return nil, 0, time.Time{}, err
	}
	if err := l.schemaReady(ctx, conn); err != nil {
		conn.Close(context.Background())
		return nil, 0, time.Time{}, err
	}
	sent = time.Now()
	if err := conn.QueryRow(ctx, "SELECT "+l.q+".open_session($1, $2, $3)", l.ttl, l.host, os.Getpid()).Scan(&id); err != nil {
		broke := conn.IsClosed()
		conn.Close(context.Background())
		if err = l.pgErr("opening a session", err); broke && !errors.Is(err, ErrPooler) {
			// The server went under the statement: unavailable, as when
			// it cannot be reached (exit 69), not a fault of leaderrun's.
			err = fmt.Errorf("%w: %w", elect.ErrUnavailable, err)
		}
		return nil, 0, time.Time{}, err
	}
	// A second transaction must reach the same backend, which holds the
	// session's advisory lock: not so behind a transaction-mode pooler.
	if _, err := conn.Exec(ctx, "SELECT "+l.q+".own_backend($1)", id); err != nil {
		conn.Close(context.Background())
		return nil, 0, time.Time{}, l.pgErr("opening a session", err)
	}
	return conn, id, sent, nil
}

// opTimeout bounds one statement of the session on the client's side: a
// little over the server's statement_timeout.
func (s *session) opTimeout() time.Duration {
	return max(time.Second, (s.ttl-s.l.margin)/3) + time.Second
}

func (s *session) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return !s.Passed()
	}
}

// do runs f on the session's connection, with a context that ends only
// by a timeout: pgx breaks a connection whose statement's context is
// cancelled, and the session must not end because one request gave up.
// The server bounds every statement of the session by statement_timeout
// and lock_timeout. A failure that closed the connection ends the
// session: nothing else may act for it.
func (s *session) do(f func(ctx context.Context, c *pgx.Conn) error) error {
	select {
	case <-s.done:
		return s.err
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opTimeout())
	defer cancel()
	s.cmu.Lock()
	s.l.roundTrips.Add(1)
	err := f(ctx, s.conn)
	closed := s.conn.IsClosed()
	s.cmu.Unlock()
	if err != nil && closed {
		s.end(fmt.Errorf("%w: the connection of session %d was lost: %w", elect.ErrSessionLost, s.id, err), true)
	}
	return err
}

// end ends the session once with cause and closes its connection. With
// revoke, its lease row is removed (when the server can be reached), so
// that its requests go now rather than at its expiry: at once if none of
// its terms is held, else when the last is released (Locker.untrack).
// Never earlier: a holder told by the end of its term to stop may still
// be stopping (leaderrun gives COMMAND --grace), and the lease, left to
// expire, keeps everyone else out until then.
func (s *session) end(cause error, revoke bool) {
	s.once.Do(func() {
		s.err = cause
		s.cancel(cause)
		go func() {
			s.cmu.Lock()
			s.conn.Close(context.Background())
			s.cmu.Unlock()
			if revoke {
				s.l.endIfIdle(s)
			}
		}()
	})
}

// revoke removes the session's row and requests, once, from the
// Locker's other connection (the session's own may be gone).
func (s *session) revoke() {
	s.revoked.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s.l.EndSession(ctx, s.id)
	})
}

type renewal struct {
	sent time.Time
	ttl  time.Duration
	err  error
}

func (s *session) loop() {
	defer close(s.stopped)
	// Renew three times in every TTL-margin, so that two renewals can be
	// lost before the deadline.
	every := (s.ttl - s.l.margin) / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	timer := time.NewTimer(time.Until(s.At()))
	defer timer.Stop()
	results := make(chan renewal, 4)
	inflight := 0
	for {
		// A process stopped past its deadline finds it passed before it
		// handles anything else.
		if s.Passed() {
			s.end(fmt.Errorf("%w: session %d not renewed within its TTL %v less margin %v", elect.ErrSessionLost, s.id, s.ttl, s.l.margin), false)
			return
		}
		select {
		case <-s.done:
			return
		case <-timer.C:
		case <-tick.C:
			if inflight >= 1 {
				continue // the connection runs one statement at a time
			}
			inflight++
			go func(sent time.Time) {
				var secs *float64
				err := s.do(func(ctx context.Context, c *pgx.Conn) error {
					return c.QueryRow(ctx, "SELECT "+s.l.q+".renew($1)", s.id).Scan(&secs)
				})
				r := renewal{sent: sent, err: err}
				if err == nil && secs != nil {
					r.ttl = time.Duration(*secs * float64(time.Second))
				}
				results <- r
			}(time.Now())
		case r := <-results:
			inflight--
			switch {
			case r.err == nil && r.ttl <= 0:
				s.end(fmt.Errorf("%w: the lease of session %d expired by the server's clock or was ended", elect.ErrSessionLost, s.id), false)
				return
			case r.err != nil:
				continue // the deadline decides, or do ended the session
			}
			s.Extend(r.sent.Add(r.ttl - s.l.margin))
			timer.Reset(time.Until(s.At()))
		}
	}
}

// bind returns a context that ends with the session's cause when the
// session ends, and with ctx's when ctx does.
func (s *session) bind(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.ctx, func() { cancel(s.err) })
	return ctx, func() { stop(); cancel(nil) }
}
