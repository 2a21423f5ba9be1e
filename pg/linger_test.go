package pg

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/elect"
)

// TestLingeringLocksNothing: when the connection of a holder goes, its
// waiter learns what it waits for (the holder's lease) with a read that
// takes no lock, not with an evaluate, which would lock the name: the
// holder's watchdog ends the term in that very moment, and its end would
// wait behind the evaluate. Here the name's row is locked by the test
// while the holder's connection goes: the waiter's session connection
// must be idle again (its read done), not waiting on that lock. Then the
// holder's session is ended, as its watchdog would, and the waiter is
// granted.
func TestLingeringLocksNothing(t *testing.T) {
	h, w, lh, g := heldAndWaited(t, "li")
	sid, err := h.Session(lh)
	if err != nil {
		t.Fatal(err)
	}
	srv := sharedServer(t)
	ctx := t.Context()
	su := srv.Super(t)
	tx, err := su.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+h.q+".epochs WHERE name = 'li' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	wpid := backendPID(t, w)
	rt0 := w.roundTrips.Load()
	terminate(t, srv, backendPID(t, h))
	if !watchEnded(w, sid, 10*time.Second) {
		t.Fatal("w's watch of the holder's connection did not fire within 10s")
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		var state, wait string
		if err := tx.QueryRow(ctx, "SELECT state, coalesce(wait_event_type, '') FROM pg_stat_activity WHERE pid = $1", wpid).Scan(&state, &wait); err != nil {
			t.Fatal(err)
		}
		if wait == "Lock" {
			t.Fatal("the waiter's session connection waits on the name's lock after its holder's connection went (it evaluated)")
		}
		if state == "idle" && w.roundTrips.Load() > rt0 {
			l := liveSession(t, w)
			if l.cmu.TryLock() {
				l.cmu.Unlock()
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter's session connection is %s (%s) 5s after its holder's connection went", state, wait)
		}
	}
	tx.Rollback(ctx)
	endAndGrant(t, h, sid, g)
}

// TestGenericPlans: a Locker's connections ask for generic plans (the
// first runs of every statement are not planned again each time), unless
// the connection string asks otherwise.
func TestGenericPlans(t *testing.T) {
	srv := sharedServer(t)
	ctx := t.Context()
	for url, want := range map[string]string{
		srv.URL(): "force_generic_plan",
		srv.URL() + "&plan_cache_mode=force_custom_plan": "force_custom_plan",
	} {
		l := open(t, srv, testSchema(t), Config{URL: url})
		var got string
		if err := l.withAdmin(ctx, func(c *pgx.Conn) error {
			return c.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&got)
		}); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: plan_cache_mode %s, want %s", url, got, want)
		}
	}
}

// TestWatchConnectionKept: the connection of a watch whose blocker's
// connection went is kept for the next watch, not closed then (a
// backend's exit costs the server processor time in the moment of a
// failover): a waiter whose blocker went (a waiter ahead of it) watches
// the next blocker on the same backend (the spare is kept a minute here,
// so that a loaded machine cannot make it idle too long); the connection
// is closed once it has been idle for spareIdle (TestWatchConnectionClosed).
func TestWatchConnectionKept(t *testing.T) {
	srv := sharedServer(t)
	schema := testSchema(t)
	cfg := Config{TTL: 20 * time.Second}
	h, x := open(t, srv, schema, cfg), open(t, srv, schema, cfg)
	w := open(t, srv, schema, Config{TTL: 20 * time.Second, Host: "wkept"})
	w.spareIdle = time.Minute
	ctx := t.Context()
	lh, err := h.Acquire(ctx, "wk", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Release()
	xctx, cancel := context.WithCancel(ctx)
	defer cancel()
	acquireAsync(xctx, x, "wk", elect.Request{})
	waitQueued(t, h, "wk", 1)
	g := acquireAsync(ctx, w, "wk", elect.Request{})
	waitQueued(t, h, "wk", 2)
	su := srv.Super(t)
	watchBackend := func() int {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
			var pids []int
			rows, err := su.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'leaderrun watch wkept %' AND wait_event_type = 'Lock'")
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var p int
				rows.Scan(&p)
				pids = append(pids, p)
			}
			rows.Close()
			if len(pids) == 1 {
				return pids[0]
			}
			if time.Now().After(deadline) {
				t.Fatalf("the waiter's watch backends asleep on a lock: %v, want one", pids)
			}
		}
	}
	first := watchBackend() // on x's connection
	terminate(t, srv, backendPID(t, x))
	hsid, _ := h.Session(lh)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		w.watchMu.Lock()
		onH := w.watchers[hsid] != nil
		w.watchMu.Unlock()
		if onH {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter did not watch the holder within 10s of the waiter ahead of it going")
		}
	}
	if next := watchBackend(); next != first {
		t.Fatalf("the waiter watches the holder on backend %d, not on %d, which watched the waiter ahead", next, first)
	}
	endAndGrant(t, h, hsid, g)
}

// TestWatchConnectionClosed: the connection of a watch that has fired,
// kept for the next watch, is closed once it has been idle for spareIdle.
func TestWatchConnectionClosed(t *testing.T) {
	srv := sharedServer(t)
	schema := testSchema(t)
	h := open(t, srv, schema, Config{TTL: 20 * time.Second})
	w := open(t, srv, schema, Config{TTL: 20 * time.Second, Host: "wclosed"})
	ctx := t.Context()
	lh, err := h.Acquire(ctx, "wc", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Release()
	g := acquireAsync(ctx, w, "wc", elect.Request{})
	waitQueued(t, h, "wc", 1)
	su := srv.Super(t)
	watches := func() int {
		t.Helper()
		var n int
		if err := su.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'leaderrun watch wclosed %'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); watches() == 0; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the waiter opened no watch of the holder's connection within 10s")
		}
	}
	hsid, err := h.Session(lh)
	if err != nil {
		t.Fatal(err)
	}
	terminate(t, srv, backendPID(t, h))
	for deadline := time.Now().Add(10*spareIdle + 10*time.Second); watches() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the waiter's watch connection is open %v after its watch fired", 10*spareIdle+10*time.Second)
		}
	}
	endAndGrant(t, h, hsid, g)
}

// watchEnded reports whether l's watch of session sid's connection has
// ended (fired) within d.
func watchEnded(l *Locker, sid int64, d time.Duration) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(time.Millisecond) {
		l.watchMu.Lock()
		watching := l.watchers[sid] != nil
		l.watchMu.Unlock()
		if !watching {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// endAndGrant ends session sid, as the holder's watchdog would, and
// checks that the waiter's grant comes on g; it releases it.
func endAndGrant(t *testing.T, h *Locker, sid int64, g <-chan grant) {
	t.Helper()
	if err := h.EndSession(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	r := recvGrant(t, g)
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.lead.Release()
}

// TestBusListensOnSpare: a leader granted as its holder's connection went
// (its watch of it fired, and keeps its connection: keepSpare) serves its
// bus on that connection, renamed, instead of starting a backend in the
// moment of the failover.
func TestBusListensOnSpare(t *testing.T) {
	srv := sharedServer(t)
	schema := testSchema(t)
	h := open(t, srv, schema, Config{TTL: 20 * time.Second})
	w := open(t, srv, schema, Config{TTL: 20 * time.Second, Host: "wspare"})
	w.spareIdle = time.Minute
	ctx := t.Context()
	lh, err := h.Acquire(ctx, "bs", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Release()
	g := acquireAsync(ctx, w, "bs", elect.Request{})
	waitQueued(t, h, "bs", 1)
	su := srv.Super(t)
	backendOf := func(app string) int {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
			var pid int
			err := su.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name LIKE $1", app).Scan(&pid)
			if err == nil {
				return pid
			}
			if time.Now().After(deadline) {
				t.Fatalf("no backend of %s within 10s: %v", app, err)
			}
		}
	}
	watch := backendOf("leaderrun watch wspare %")
	sid, err := h.Session(lh)
	if err != nil {
		t.Fatal(err)
	}
	terminate(t, srv, backendPID(t, h))
	if !watchEnded(w, sid, 10*time.Second) {
		t.Fatal("the waiter's watch of the holder's connection did not fire within 10s")
	}
	if err := h.EndSession(ctx, sid); err != nil {
		t.Fatal(err)
	}
	r := recvGrant(t, g)
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.lead.Release()
	srvBus, err := w.ListenBus(r.lead)
	if err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srvBus.Serve(bctx) }()
	defer func() { cancel(); <-served }()
	if bus := backendOf("leaderrun bus wspare %"); bus != watch {
		t.Fatalf("the leader's bus listens on backend %d, not on %d, its watch's", bus, watch)
	}
}
