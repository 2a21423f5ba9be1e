package pg

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/elect"
)

// next returns the next snapshot from ch that ok accepts.
func nextSnap(t *testing.T, ch <-chan elect.Snapshot, what string, ok func(elect.Snapshot) bool) elect.Snapshot {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case s, open := <-ch:
			if !open {
				t.Fatalf("%s: the watch ended", what)
			}
			if ok(s) {
				return s
			}
		case <-deadline:
			t.Fatalf("%s: no such snapshot within 20s", what)
		}
	}
}

// TestWatch: a watcher sees every change of a name made by other
// sessions (a grant, a waiter, a release), and the end of a holder whose
// process was SIGKILLed once its lease expired, without polling.
func TestWatch(t *testing.T) {
	srv := sharedServer(t)
	schema := testSchema(t)
	const ttl = 3 * time.Second
	w, a, b := open(t, srv, schema, Config{TTL: ttl}), open(t, srv, schema, Config{TTL: ttl}), open(t, srv, schema, Config{TTL: ttl})
	ctx := t.Context()
	ch, err := w.Watch(ctx, "wt")
	if err != nil {
		t.Fatal(err)
	}
	nextSnap(t, ch, "first", func(s elect.Snapshot) bool { return len(s.Held)+len(s.Pending) == 0 })
	la, err := a.Acquire(ctx, "wt", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	nextSnap(t, ch, "held", func(s elect.Snapshot) bool { return len(s.Held) == 1 && s.Held[0].Epoch == la.Epoch() })
	g := acquireAsync(ctx, b, "wt", elect.Request{})
	nextSnap(t, ch, "queued", func(s elect.Snapshot) bool { return len(s.Pending) == 1 })
	la.Release()
	r := recvGrant(t, g)
	if r.err != nil {
		t.Fatal(r.err)
	}
	nextSnap(t, ch, "handed over", func(s elect.Snapshot) bool {
		return len(s.Pending) == 0 && len(s.Held) == 1 && s.Held[0].Epoch == r.lead.Epoch()
	})
	r.lead.Release()
	nextSnap(t, ch, "free", func(s elect.Snapshot) bool { return len(s.Held)+len(s.Pending) == 0 })

	h := contender(t, srv, schema, "wt", ttl)
	h.Expect("leader ")
	nextSnap(t, ch, "held by a process", func(s elect.Snapshot) bool { return len(s.Held) == 1 })
	killed := time.Now()
	h.Kill()
	nextSnap(t, ch, "the dead holder's lease expired", func(s elect.Snapshot) bool { return len(s.Held) == 0 })
	if d := time.Since(killed); d > ttl+2*time.Second {
		t.Fatalf("the watch saw the dead holder go %v after the kill (TTL %v)", d, ttl)
	}
}

// TestWatchKeepsConnections: a watcher whose name changes (a waiter comes
// and goes, three times) while its holder stays keeps the connection that
// sleeps on the holder's, rather than opening one at every change; and a
// Locker watching its own held name opens none for its own session.
func TestWatchKeepsConnections(t *testing.T) {
	srv := sharedServer(t)
	schema := testSchema(t)
	h := open(t, srv, schema, Config{Host: "wk-holder"})
	w := open(t, srv, schema, Config{Host: "wk-watcher"})
	x := open(t, srv, schema, Config{Host: "wk-other"})
	ctx := t.Context()
	lead, err := h.Acquire(ctx, "wk", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Release()
	super := srv.Super(t)
	watchConns := func(host string) []int {
		rows, err := super.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name LIKE $1 ORDER BY pid", "leaderrun watch "+host+" %")
		if err != nil {
			t.Fatal(err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			t.Fatal(err)
		}
		return pids
	}
	ch, err := w.Watch(ctx, "wk")
	if err != nil {
		t.Fatal(err)
	}
	own, err := h.Watch(ctx, "wk")
	if err != nil {
		t.Fatal(err)
	}
	nextSnap(t, ch, "the holder", func(s elect.Snapshot) bool { return len(s.Held) == 1 })
	// Its LISTEN and the sleep on the holder's connection.
	var before []int
	for deadline := time.Now().Add(20 * time.Second); len(before) != 2; time.Sleep(5 * time.Millisecond) {
		if before = watchConns("wk-watcher"); time.Now().After(deadline) {
			t.Fatalf("the watcher has %d watch connections, want 2", len(before))
		}
	}
	for i := range 3 {
		wctx, cancel := context.WithCancel(ctx)
		g := acquireAsync(wctx, x, "wk", elect.Request{})
		nextSnap(t, ch, "a waiter", func(s elect.Snapshot) bool { return len(s.Pending) == 1 })
		cancel()
		recvGrant(t, g)
		nextSnap(t, ch, "no waiter", func(s elect.Snapshot) bool { return len(s.Pending) == 0 })
		if after := watchConns("wk-watcher"); !slices.Equal(after, before) {
			t.Fatalf("change %d: the watcher's watch connections went from %v to %v", i+1, before, after)
		}
	}
	nextSnap(t, own, "its own holding", func(s elect.Snapshot) bool { return len(s.Held) == 1 })
	if n := len(watchConns("wk-holder")); n != 1 {
		t.Fatalf("the holder watching its own name has %d watch connections, want its LISTEN alone", n)
	}
}
