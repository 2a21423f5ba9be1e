package pg

import (
	"testing"
	"time"

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
