package etcd

import (
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/elect"
)

// TestStaleGrantNotTaken is the chaos soak's overlap: a waiter learns of
// the grant its predecessor handed it (the release txn wrote its marker)
// only after its lease was revoked (as an etcd 3.4 member resuming from a
// stop revokes leases it believes expired), and the next waiter was
// granted meanwhile. It must not take the grant up: Acquire returns
// ErrSessionLost, and the only holder is the next waiter.
func TestStaleGrantNotTaken(t *testing.T) {
	c := sharedCluster(t)
	cli := c.Client(t)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	holdings := captureHoldings(t)
	a := open(t, c, pfx, Config{})
	b := open(t, c, pfx, Config{})
	d := open(t, c, pfx, Config{})
	h, err := a.Acquire(ctx, "job", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	wb := async(ctx, b, "job", elect.Request{})
	queuedN(t, a, "job", 1)
	wd := async(ctx, d, "job", elect.Request{})
	queuedN(t, a, "job", 2)
	monitorKnows(t, holdings()[0], 2) // the holder's monitor has seen them join: it hands over to b
	var once sync.Once
	testHookConfirm = func(ac *acquirer) {
		if ac.l != b {
			return
		}
		once.Do(func() {
			// The grant is made, and b is about to take it up: the
			// server revokes b's lease, and d is granted.
			if _, err := cli.Revoke(ctx, ac.s.id); err != nil {
				t.Error(err)
			}
			r := answer(t, wd, 10*time.Second, "the next waiter")
			if r.err != nil {
				t.Errorf("next waiter: %v", r.err)
				return
			}
			t.Cleanup(func() { r.lead.Release() })
		})
	}
	defer func() { testHookConfirm = nil }()
	h.Release()
	r := answer(t, wb, 15*time.Second, "the waiter whose lease went")
	if r.err == nil {
		r.lead.Release()
		t.Fatal("a grant whose lease was revoked before it was taken up was returned as a leadership: two holders")
	}
	if !errors.Is(r.err, elect.ErrSessionLost) {
		t.Fatalf("got %v, want ErrSessionLost", r.err)
	}
	snap, err := a.Query(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Held) != 1 {
		t.Fatalf("holders %+v, want the next waiter alone", snap.Held)
	}
}

// TestSilentWatchRestarted: a waiter whose watch goes silent (its member
// stopped: no events, no cancel) still learns of its turn: the watch asks
// for progress, and when that too goes unanswered it reads again and
// watches anew.
func TestSilentWatchRestarted(t *testing.T) {
	c := sharedCluster(t)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	a := open(t, c, pfx, Config{})
	b := open(t, c, pfx, Config{})
	h, err := a.Acquire(ctx, "job", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var silenced *liveWatch
	dropped := 0
	testHookWatchResponse = func(w *liveWatch, wr clientv3.WatchResponse) bool {
		if w.l != b {
			return true
		}
		mu.Lock()
		defer mu.Unlock()
		if silenced == nil {
			silenced = w // b's first watch: as if its member stopped
		}
		if w == silenced {
			dropped++
			return false
		}
		return true
	}
	defer func() { testHookWatchResponse = nil }()
	wb := async(ctx, b, "job", elect.Request{})
	queuedN(t, a, "job", 1)
	h.Release()
	r := answer(t, wb, 4*b.progressEvery()+10*time.Second, "the waiter with a silent watch")
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.lead.Release()
	mu.Lock()
	defer mu.Unlock()
	if dropped == 0 {
		t.Fatal("the test dropped nothing: the waiter did not watch")
	}
}
