package pg

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/pg/internal/pgtest"
)

// backendPID is the server pid of l's session connection.
func backendPID(t *testing.T, l *Locker) int {
	t.Helper()
	l.mu.Lock()
	s := l.sess
	l.mu.Unlock()
	if s == nil {
		t.Fatal("no session")
	}
	s.cmu.Lock()
	defer s.cmu.Unlock()
	return int(s.conn.PgConn().PID())
}

func terminate(t *testing.T, srv *pgtest.Server, pid int) {
	t.Helper()
	var ok bool
	if err := srv.Super(t).QueryRow(context.Background(), "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d): %v %v", pid, ok, err)
	}
}

type grant struct {
	lead *elect.Leadership
	at   time.Time
	err  error
}

func acquireAsync(ctx context.Context, l *Locker, name string, req elect.Request) <-chan grant {
	ch := make(chan grant, 1)
	go func() {
		lead, err := l.Acquire(ctx, name, req)
		ch <- grant{lead, time.Now(), err}
	}()
	return ch
}

// recvGrant takes the result of acquireAsync, within 30s.
func recvGrant(t testing.TB, ch <-chan grant) grant {
	t.Helper()
	select {
	case g := <-ch:
		return g
	case <-time.After(30 * time.Second):
		t.Fatal("no grant within 30s")
	}
	return grant{}
}

func waitQueued(t testing.TB, l *Locker, name string, n int) elect.Snapshot {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, err := l.Query(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Pending) == n {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pending, want %d", len(s.Pending), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// endedAt waits for l's term to end and returns when it did.
func endedAt(t *testing.T, lead *elect.Leadership, within time.Duration) time.Time {
	t.Helper()
	select {
	case <-lead.Done():
		return time.Now()
	case <-time.After(within):
		dl, _, _ := lead.Deadline()
		t.Logf("deadline in %v", time.Until(dl))
		t.Fatalf("term of %s did not end within %v", lead.Name(), within)
	}
	return time.Time{}
}

// TestTwoSessionsHandover: across sessions (two Lockers), a release wakes
// the next in line by a notification addressed to it.
func TestTwoSessionsHandover(t *testing.T) {
	srv := sharedServer(t)
	schema := testSchema(t)
	a, b := open(t, srv, schema, Config{}), open(t, srv, schema, Config{})
	ctx := t.Context()
	la, err := a.Acquire(ctx, "h", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	wb := acquireAsync(ctx, b, "h", elect.Request{})
	waitQueued(t, a, "h", 1)
	select {
	case g := <-wb:
		t.Fatalf("granted while held: %v", g.err)
	case <-time.After(100 * time.Millisecond):
	}
	la.Release()
	g := recvGrant(t, wb)
	if g.err != nil {
		t.Fatal(g.err)
	}
	if g.lead.Epoch() <= la.Epoch() {
		t.Fatalf("epoch %d after %d", g.lead.Epoch(), la.Epoch())
	}
	g.lead.Release()
}

// TestTerminateHolder: the server ends the holder's connection
// (pg_terminate_backend). Its advisory lock is free at once, which is how
// advisory-lock schedulers get two leaders; here the waiter is granted
// only after the holder's term has ended by its own clock, and the holder
// learns it lost with elect.ErrSessionLost.
func TestTerminateHolder(t *testing.T) {
	srv := sharedServer(t)
	schema := testSchema(t)
	a, b := open(t, srv, schema, Config{}), open(t, srv, schema, Config{})
	ctx := t.Context()
	la, err := a.Acquire(ctx, "th", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	wb := acquireAsync(ctx, b, "th", elect.Request{})
	waitQueued(t, a, "th", 1)
	// The holder's own deadline bounds when anyone else may be granted:
	// the waiter must not be before it, whatever tells the holder sooner.
	dl, _, _ := la.Deadline()
	terminate(t, srv, backendPID(t, a))
	end := endedAt(t, la, a.TTL())
	if !errors.Is(la.Err(), elect.ErrSessionLost) {
		t.Fatalf("holder's term ended with %v, want ErrSessionLost", la.Err())
	}
	var g grant
	select {
	case g = <-wb:
	case <-time.After(2 * a.TTL()):
		t.Fatal("the waiter was not granted after the holder's lease expired")
	}
	if g.err != nil {
		t.Fatal(g.err)
	}
	if g.at.Before(end) || g.at.Before(dl) {
		t.Fatalf("two holders: the waiter was granted %v before the holder's term ended and %v before its deadline", end.Sub(g.at), dl.Sub(g.at))
	}
	la.Release()
	g.lead.Release()
}

// TestTerminateWaiter: the server ends a waiter's connection. The waiter
// behind it passes it at once when the holder releases (a waiting request
// of a session whose connection is gone can never be granted), and the
// ended waiter's Elector queues again at the tail.
func TestTerminateWaiter(t *testing.T) {
	srv := sharedServer(t)
	schema := testSchema(t)
	a, b, c := open(t, srv, schema, Config{}), open(t, srv, schema, Config{}), open(t, srv, schema, Config{})
	ctx := t.Context()
	la, err := a.Acquire(ctx, "tw", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	led := make(chan uint64, 4)
	ectx, stop := context.WithCancel(ctx)
	defer stop()
	e := &elect.Elector{Backend: b, Name: "tw", Requeue: true}
	go e.Run(ectx, func(ctx context.Context, l *elect.Leadership) error {
		led <- l.Epoch()
		<-ctx.Done()
		return nil
	})
	first := waitQueued(t, a, "tw", 1).Pending[0].Ticket
	wc := acquireAsync(ctx, c, "tw", elect.Request{})
	waitQueued(t, a, "tw", 2)
	terminate(t, srv, backendPID(t, b))
	// The Elector's request ends with its session and is made again, at
	// the tail, behind c's.
	deadline := time.Now().Add(2 * b.TTL())
	for {
		s, err := a.Query(ctx, "tw")
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Pending) == 2 && s.Pending[0].Ticket != first && s.Pending[1].Ticket > s.Pending[0].Ticket && s.Pending[0].Ticket > first {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ended waiter did not queue again behind c: %+v", s.Pending)
		}
		time.Sleep(10 * time.Millisecond)
	}
	released := time.Now()
	la.Release()
	g := recvGrant(t, wc)
	if g.err != nil {
		t.Fatal(g.err)
	}
	if d := g.at.Sub(released); d > b.TTL()/2 {
		t.Fatalf("c was granted %v after the release: it waited for the ended waiter's lease", d)
	}
	select {
	case ep := <-led:
		t.Fatalf("the requeued Elector led (epoch %d) while c holds", ep)
	case <-time.After(100 * time.Millisecond):
	}
	g.lead.Release()
	select {
	case <-led:
	case <-time.After(20 * time.Second):
		t.Fatal("the requeued Elector never led")
	}
}

// TestServerStopped: the server is stopped (SIGSTOP of every process of
// it) for longer than the TTL. The holder's term ends by its own clock,
// within the TTL of the stop, with nobody to tell it; after the server
// continues, the name is granted again.
func TestServerStopped(t *testing.T) {
	srv := pgtest.StartT(t)
	schema := testSchema(t)
	a, b := open(t, srv, schema, Config{}), open(t, srv, schema, Config{})
	ctx := t.Context()
	la, err := a.Acquire(ctx, "ss", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	srv.Signal(syscall.SIGSTOP)
	end := endedAt(t, la, a.TTL()+time.Second)
	if d := end.Sub(stopped); d > a.TTL() {
		t.Fatalf("the term ended %v after the server stopped, beyond the TTL %v", d, a.TTL())
	}
	if !errors.Is(la.Err(), elect.ErrSessionLost) {
		t.Fatalf("term ended with %v", la.Err())
	}
	time.Sleep(time.Until(stopped.Add(a.TTL() + time.Second)))
	srv.Signal(syscall.SIGCONT)
	la.Release()
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		lb, err := b.Acquire(actx, "ss", elect.Request{})
		if err == nil {
			if lb.Epoch() <= la.Epoch() {
				t.Fatalf("epoch %d after %d", lb.Epoch(), la.Epoch())
			}
			lb.Release()
			return
		}
		if !errors.Is(err, elect.ErrSessionLost) && !errors.Is(err, elect.ErrUnavailable) {
			t.Fatalf("after the server continued: %v", err)
		}
	}
}

// TestServerRestart: an immediate restart of the server (every backend
// ends at once, recovery from the WAL). The holder's term ends, nobody
// is granted before it has, and the name is granted again after, with a
// higher epoch.
func TestServerRestart(t *testing.T) {
	srv := pgtest.StartT(t)
	schema := testSchema(t)
	a, b := open(t, srv, schema, Config{}), open(t, srv, schema, Config{})
	ctx := t.Context()
	la, err := a.Acquire(ctx, "rs", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	granted := make(chan grant, 1)
	go func() {
		for {
			lb, err := b.Acquire(ctx, "rs", elect.Request{})
			if err == nil || (!errors.Is(err, elect.ErrSessionLost) && !errors.Is(err, elect.ErrUnavailable)) {
				granted <- grant{lb, time.Now(), err}
				return
			}
		}
	}()
	waitQueued(t, a, "rs", 1)
	dl, _, _ := la.Deadline()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	end := endedAt(t, la, a.TTL())
	var g grant
	select {
	case g = <-granted:
	case <-time.After(30 * time.Second):
		t.Fatal("nobody was granted after the restart")
	}
	if g.err != nil {
		t.Fatal(g.err)
	}
	// Not released: the lease, which the restart kept, is what the
	// waiter must wait for, beyond the holder's own deadline.
	if g.at.Before(end) || g.at.Before(dl) {
		t.Fatalf("two holders: granted %v before the first term ended and %v before its deadline", end.Sub(g.at), dl.Sub(g.at))
	}
	la.Release()
	if g.lead.Epoch() <= la.Epoch() {
		t.Fatalf("epoch %d after %d", g.lead.Epoch(), la.Epoch())
	}
	g.lead.Release()
}

// TestOtherBackendRefused: only the session's own connection may act for
// it. Another backend's call of enqueue, evaluate, leave or renew for the
// session, as a transaction-mode pooler would make, is refused with
// ErrPooler (renew finds nothing to renew), and changes nothing.
func TestOtherBackendRefused(t *testing.T) {
	srv := sharedServer(t)
	schema := testSchema(t)
	l := open(t, srv, schema, Config{})
	ctx := t.Context()
	lead, err := l.Acquire(ctx, "ob", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Release()
	sid, err := l.Session(lead)
	if err != nil {
		t.Fatal(err)
	}
	var ticket int64
	c := srv.Super(t)
	if err := c.QueryRow(ctx, "SELECT ticket FROM "+schema+".requests WHERE session_id = $1", sid).Scan(&ticket); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"SELECT " + schema + ".evaluate($1, $2)",
		"SELECT " + schema + ".leave($1, $2)",
		"SELECT " + schema + ".enqueue($2, 'ob2', true, false, false, 'c', 'k', 1, 'h', 0, '{}', '{}') WHERE $1 > 0",
	} {
		_, err := c.Exec(ctx, q, ticket, sid)
		if err := l.pgErr("test", err); !errors.Is(err, ErrPooler) {
			t.Errorf("%s from another backend: %v, want ErrPooler", q, err)
		}
	}
	var secs *float64
	if err := c.QueryRow(ctx, "SELECT "+schema+".renew($1)", sid).Scan(&secs); err != nil || secs != nil {
		t.Errorf("renew from another backend: %v %v, want no renewal", secs, err)
	}
	if s, _ := l.Query(ctx, "ob"); len(s.Held) != 1 || lead.Err() != nil {
		t.Fatalf("after the refused calls: %+v, %v", s, lead.Err())
	}
}
