package pg

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/proctest"
	"github.com/leaderrun/leaderrun/pg/internal/pgtest"
)

func contender(t *testing.T, srv *pgtest.Server, schema, name string, ttl time.Duration) *proctest.Proc {
	t.Helper()
	return proctest.StartRole(t, "contender", "contender",
		"LR_URL="+srv.URL(), "LR_SCHEMA="+schema, "LR_NAME="+name, fmt.Sprintf("LR_TTL=%v", ttl))
}

// TestDeadWaiterPassed: a waiting process is SIGKILLed; the kernel closes
// its connection, and the waiter behind it is granted as soon as the
// holder releases, not a TTL later.
func TestDeadWaiterPassed(t *testing.T) {
	srv := sharedServer(t)
	schema := testSchema(t)
	const ttl = 20 * time.Second
	a, c := open(t, srv, schema, Config{TTL: ttl}), open(t, srv, schema, Config{TTL: ttl})
	ctx := t.Context()
	la, err := a.Acquire(ctx, "dw", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	b := contender(t, srv, schema, "dw", ttl)
	b.Expect("queued")
	wc := acquireAsync(ctx, c, "dw", elect.Request{})
	waitQueued(t, a, "dw", 2)
	b.Kill()
	// Once the server has seen its connections close. (A waiter that dies
	// in the instant before a release, before the server sees its session's
	// connection close, may be handed the name in the release, and then
	// passes at its lease's expiry, as a waiter on a dead host does.)
	// The session connection, which leaderrun names with its pid; its
	// connection that sleeps on the holder's lock stays until it wakes.
	waitNoBackend(t, a, "application_name LIKE $1", fmt.Sprintf("leaderrun session %% pid %d", b.PID()))
	released := time.Now()
	la.Release()
	select {
	case g := <-wc:
		if g.err != nil {
			t.Fatal(g.err)
		}
		t.Logf("granted %v after the release, past a SIGKILLed waiter", g.at.Sub(released))
		g.lead.Release()
	case <-time.After(ttl / 2):
		t.Fatal("the waiter behind a dead one was not granted within half the TTL")
	}
}

// waitNoBackend waits until the server has no backend where cond holds
// of pg_stat_activity's row ($1 is arg).
func waitNoBackend(t *testing.T, l *Locker, cond string, arg any) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := l.withAdmin(context.Background(), func(c *pgx.Conn) error {
			return c.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE "+cond, arg).Scan(&n)
		})
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server still has %d backends where %s ($1 = %v) after 10s", n, cond, arg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDeadHolderExpires: a holding process is SIGKILLed (no watchdog
// here): the waiter wakes when the server sees the connection close, and
// is granted once the lease has expired by the server's clock, within a
// TTL of the kill and with a higher epoch.
func TestDeadHolderExpires(t *testing.T) {
	srv := sharedServer(t)
	schema := testSchema(t)
	const ttl = 3 * time.Second
	w := open(t, srv, schema, Config{TTL: ttl})
	h := contender(t, srv, schema, "dh", ttl)
	line := h.Expect("leader ")
	var epoch uint64
	fmt.Sscan(line[len("leader "):], &epoch)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	g := acquireAsync(ctx, w, "dh", elect.Request{})
	waitQueued(t, w, "dh", 1)
	killed := time.Now()
	h.Kill()
	r := recvGrant(t, g)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if d := r.at.Sub(killed); d > ttl+time.Second {
		t.Fatalf("granted %v after the holder died, beyond its TTL %v", d, ttl)
	}
	if r.lead.Epoch() <= epoch {
		t.Fatalf("epoch %d after %d", r.lead.Epoch(), epoch)
	}
	t.Logf("granted %v after the SIGKILL of the holder (TTL %v)", r.at.Sub(killed), ttl)
	r.lead.Release()
}

// TestKillAfterAcrossSessions: a steal with KillAfter, against a holder of
// another session that never lets go: its term ends with ErrStolen at
// once, its session is ended after KillAfter, and the stealer is granted
// then, not a TTL later.
func TestKillAfterAcrossSessions(t *testing.T) {
	srv := sharedServer(t)
	schema := testSchema(t)
	const ttl = 20 * time.Second
	a, b := open(t, srv, schema, Config{TTL: ttl}), open(t, srv, schema, Config{TTL: ttl})
	ctx := t.Context()
	la, err := a.Acquire(ctx, "ka", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	g := acquireAsync(ctx, b, "ka", elect.Request{Steal: true, KillAfter: 300 * time.Millisecond})
	endedAt(t, la, 5*time.Second)
	if la.Err() != elect.ErrStolen {
		t.Fatalf("holder's term ended with %v, want ErrStolen", la.Err())
	}
	r := recvGrant(t, g)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if d := r.at.Sub(start); d < 300*time.Millisecond || d > ttl/2 {
		t.Fatalf("steal granted after %v; want after KillAfter and well before the TTL", d)
	}
	if r.lead.Epoch() <= la.Epoch() {
		t.Fatalf("epoch %d after %d", r.lead.Epoch(), la.Epoch())
	}
	la.Release() // late: deletes nothing of the stealer's
	if s, _ := b.Query(ctx, "ka"); len(s.Held) != 1 || s.Held[0].Epoch != r.lead.Epoch() {
		t.Fatalf("after the deposed holder's late release: %+v", s.Held)
	}
	// The killed session's Locker starts a new one.
	r.lead.Release()
	l2, err := a.Acquire(ctx, "ka", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	l2.Release()
}

// TestNotifyBounded: a hand-off wakes one waiter, however many wait: the
// notifications the waiting Lockers receive for one release do not grow
// with the queue (4, 24 and 200 waiters; the 200 share 20 Lockers, ten
// each, to stay within the test server's connections).
func TestNotifyBounded(t *testing.T) {
	srv := sharedServer(t)
	schema := testSchema(t)
	ctx := t.Context()
	h := open(t, srv, schema, Config{})
	lead, err := h.Acquire(ctx, "nb", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ waiters, lockers int }{{4, 4}, {24, 24}, {200, 20}} {
		var ws []*Locker
		for range tc.lockers {
			ws = append(ws, open(t, srv, schema, Config{}))
		}
		var gs []<-chan grant
		for i := range tc.waiters {
			gs = append(gs, acquireAsync(ctx, ws[i%tc.lockers], "nb", elect.Request{}))
			waitQueued(t, h, "nb", i+1)
		}
		count := func() int64 {
			var sum int64
			for _, w := range ws {
				sum += w.lis.received.Load()
			}
			return sum + h.lis.received.Load()
		}
		before := count()
		lead.Release()
		r := recvGrant(t, gs[0])
		if r.err != nil {
			t.Fatal(r.err)
		}
		time.Sleep(100 * time.Millisecond) // any stray notification arrives
		got := count() - before
		t.Logf("%d waiters: %d notifications for one hand-off", tc.waiters, got)
		if got > 2 {
			t.Fatalf("%d waiters: one hand-off sent %d notifications", tc.waiters, got)
		}
		lead = r.lead
		// Let the rest through, in order.
		for _, g := range gs[1:] {
			lead.Release()
			r := recvGrant(t, g)
			if r.err != nil {
				t.Fatal(r.err)
			}
			lead = r.lead
		}
		total := count() - before
		t.Logf("%d waiters: %d notifications for all %d hand-offs", tc.waiters, total, tc.waiters)
		if total > 2*int64(tc.waiters) {
			t.Fatalf("%d hand-offs sent %d notifications", tc.waiters, total)
		}
	}
	lead.Release()
}
