package etcd

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/elect"
)

// TestHandoffWakesOne: a queue of n waiters drains with O(1) watch events
// per hand-off: each waiter watches the request ahead of it (and its own
// key), not the whole name, so a hand-off reaches the one waiter behind
// it. Before, every waiter watched every lock key of the name: about n²/2
// events for the drain (190 for n = 20, against the 4n allowed here).
func TestHandoffWakesOne(t *testing.T) {
	c := sharedCluster(t)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	const n = 20
	var mine sync.Map
	var events atomic.Int64
	testHookWatchResponse = func(w *liveWatch, wr clientv3.WatchResponse) bool {
		if _, ok := mine.Load(w.l); ok {
			events.Add(int64(len(wr.Events)))
		}
		return true
	}
	defer func() { testHookWatchResponse = nil }()
	h := open(t, c, pfx, Config{})
	mine.Store(h, true)
	first, err := h.Acquire(ctx, "job", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var ws []<-chan result
	for i := range n {
		l := open(t, c, pfx, Config{Host: fmt.Sprint(i)})
		mine.Store(l, true)
		ch := make(chan result, 1)
		go func() {
			lead, err := l.Acquire(ctx, "job", elect.Request{})
			if err == nil {
				err = lead.Release()
			}
			ch <- result{lead, err}
		}()
		ws = append(ws, ch)
		queuedN(t, h, "job", i+1)
	}
	time.Sleep(100 * time.Millisecond) // every watch is up
	before := events.Load()
	first.Release()
	for i, ch := range ws {
		if r := answer(t, ch, 30*time.Second, fmt.Sprint("waiter ", i)); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if got := events.Load() - before; got > 4*n {
		t.Fatalf("the drain of %d waiters delivered %d watch events to them, more than %d: hand-offs wake more than the next waiter", n, got, 4*n)
	}
}
