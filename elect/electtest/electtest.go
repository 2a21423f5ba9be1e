// Package electtest is the conformance suite of elect.Backend, in the
// manner of testing/fstest.TestFS: a backend proves that it keeps elect's
// contract by passing [Run]. The suite asks only for Acquire and Query
// (and QueryAll, of a [QueryAller], as the leaderrun command's backends
// are), in one process, so a backend's own tests must still cover what
// needs other processes or hosts (crashes, KillAfter, stopped holders).
package electtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
)

// QueryAller is a Backend that also answers for every name at once, as
// the leaderrun command's status asks its backends to (cmd.Backend). The
// suite checks QueryAll when the backend has it, and skips that subtest
// otherwise.
type QueryAller interface {
	QueryAll(ctx context.Context) (elect.Snapshot, error)
}

// Run runs the conformance suite as subtests of t. newBackend is called
// once per subtest and returns a backend of its own (a fresh directory, a
// fresh key prefix); it should close the backend with t.Cleanup. Every
// contender of a subtest uses that one backend concurrently, so the backend
// must be safe for concurrent use, as elect.Locker is.
func Run(t *testing.T, newBackend func(t *testing.T) elect.Backend) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, elect.Backend)
	}{
		{"ExclusiveExcludes", testExclusiveExcludes},
		{"MutualExclusion", testMutualExclusion},
		{"FIFO", testFIFO},
		{"SharedTogether", testSharedTogether},
		{"WritersDoNotStarve", testWritersDoNotStarve},
		{"IfAvailable", testIfAvailable},
		{"CancelLeavesNothing", testCancelLeavesNothing},
		{"Steal", testSteal},
		{"StealSharedHolders", testStealSharedHolders},
		{"StealAbandoned", testStealAbandoned},
		{"EpochsGrow", testEpochsGrow},
		{"QueryShape", testQueryShape},
		{"ReleaseIdempotent", testReleaseIdempotent},
		{"ElectorAbdicate", testElectorAbdicate},
		{"InvalidInput", testInvalidInput},
		{"QueryAll", testQueryAll},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newBackend(t))
		})
	}
}

func testExclusiveExcludes(t *testing.T, b elect.Backend) {
	ctx := testCtx(t)
	a := acquire(t, ctx, b, "x", elect.Request{})
	if _, err := b.Acquire(ctx, "x", elect.Request{IfAvailable: true}); !errors.Is(err, elect.ErrBusy) {
		t.Fatalf("IfAvailable while held: %v, want ErrBusy", err)
	}
	w := async(t, ctx, b, "x", elect.Request{})
	waiting(t, w, "second exclusive")
	release(t, a)
	l := granted(t, w, "second exclusive after release")
	if l.Epoch() <= a.Epoch() {
		t.Fatalf("epoch %d after %d", l.Epoch(), a.Epoch())
	}
	if l.Mode() != elect.Exclusive || l.Name() != "x" {
		t.Fatalf("leadership says %v %q", l.Mode(), l.Name())
	}
	release(t, l)
}

func testMutualExclusion(t *testing.T, b elect.Backend) {
	ctx := testCtx(t)
	// An exclusive holder adds 1000 to the gauge, a shared one 1: an
	// exclusive holder must see exactly 1000, a shared one less than 1000.
	var gauge, bad atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mode, add := elect.Exclusive, int32(1000)
			if i%3 == 0 {
				mode, add = elect.Shared, 1
			}
			for range 4 {
				l, err := b.Acquire(ctx, "mx", elect.Request{Mode: mode})
				if err != nil {
					errs <- err
					return
				}
				n := gauge.Add(add)
				if (mode == elect.Exclusive && n != 1000) || (mode == elect.Shared && n >= 1000) {
					bad.Store(n)
				}
				time.Sleep(time.Millisecond)
				gauge.Add(-add)
				l.Release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := bad.Load(); n != 0 {
		t.Fatalf("holders overlapped: the gauge read %d", n)
	}
}

func testFIFO(t *testing.T, b elect.Backend) {
	ctx := testCtx(t)
	h := acquire(t, ctx, b, "fifo", elect.Request{Command: cmd("holder")})
	const n = 8
	var chans []<-chan result
	var want []string
	for i := range n {
		c := fmt.Sprintf("w%d", i)
		chans = append(chans, async(t, ctx, b, "fifo", elect.Request{Command: cmd(c)}))
		want = append(want, c)
		queued(t, b, "fifo", i+1)
	}
	s := query(t, b, "fifo")
	if got := commands(s.Pending); !slices.Equal(got, want) {
		t.Fatalf("pending %v, want %v", got, want)
	}
	for i := 1; i < len(s.Pending); i++ {
		if s.Pending[i].Ticket <= s.Pending[i-1].Ticket {
			t.Fatalf("tickets not increasing: %+v", s.Pending)
		}
	}
	prev := h
	release(t, h)
	for i, ch := range chans {
		l := granted(t, ch, want[i])
		for _, later := range chans[i+1:] {
			select {
			case r := <-later:
				t.Fatalf("a later waiter answered (%v) before %s released", r.err, want[i])
			default:
			}
		}
		if l.Epoch() <= prev.Epoch() {
			t.Fatalf("%s: epoch %d after %d", want[i], l.Epoch(), prev.Epoch())
		}
		prev = l
		release(t, l)
	}
}

func testSharedTogether(t *testing.T, b elect.Backend) {
	ctx := testCtx(t)
	s1 := acquire(t, ctx, b, "sh", elect.Request{Mode: elect.Shared})
	s2 := acquire(t, ctx, b, "sh", elect.Request{Mode: elect.Shared}) // granted beside s1
	if s1.Epoch() == s2.Epoch() {
		t.Fatalf("two grants drew the same epoch %d", s1.Epoch())
	}
	if got := len(query(t, b, "sh").Held); got != 2 {
		t.Fatalf("%d holders, want 2", got)
	}
	x := async(t, ctx, b, "sh", elect.Request{})
	waiting(t, x, "exclusive behind shared holders")
	release(t, s1)
	waiting(t, x, "exclusive behind one shared holder")
	release(t, s2)
	release(t, granted(t, x, "exclusive after the shared holders"))
}

func testWritersDoNotStarve(t *testing.T, b elect.Backend) {
	ctx := testCtx(t)
	h := acquire(t, ctx, b, "ws", elect.Request{Mode: elect.Shared, Command: cmd("h")})
	x := async(t, ctx, b, "ws", elect.Request{Command: cmd("x")})
	queued(t, b, "ws", 1)
	// A shared request behind a queued exclusive one waits for it.
	if _, err := b.Acquire(ctx, "ws", elect.Request{Mode: elect.Shared, IfAvailable: true}); !errors.Is(err, elect.ErrBusy) {
		t.Fatalf("shared IfAvailable behind a queued exclusive: %v, want ErrBusy", err)
	}
	s1 := async(t, ctx, b, "ws", elect.Request{Mode: elect.Shared, Command: cmd("s1")})
	queued(t, b, "ws", 2)
	s2 := async(t, ctx, b, "ws", elect.Request{Mode: elect.Shared, Command: cmd("s2")})
	queued(t, b, "ws", 3)
	x2 := async(t, ctx, b, "ws", elect.Request{Command: cmd("x2")})
	queued(t, b, "ws", 4)
	s3 := async(t, ctx, b, "ws", elect.Request{Mode: elect.Shared, Command: cmd("s3")})
	s := queued(t, b, "ws", 5)
	if got, want := commands(s.Pending), []string{"x", "s1", "s2", "x2", "s3"}; !slices.Equal(got, want) {
		t.Fatalf("pending %v, want %v", got, want)
	}
	waiting(t, s1, "shared behind a queued exclusive")
	release(t, h)
	lx := granted(t, x, "exclusive")
	waiting(t, s1, "shared behind the exclusive holder")
	release(t, lx)
	// Consecutive shared requests are granted together...
	l1 := granted(t, s1, "first shared after the exclusive")
	l2 := granted(t, s2, "second shared after the exclusive")
	// ...and one behind the next exclusive waits.
	waiting(t, s3, "shared behind the second exclusive")
	release(t, l1)
	release(t, l2)
	lx2 := granted(t, x2, "second exclusive")
	release(t, lx2)
	release(t, granted(t, s3, "last shared"))
}

func testIfAvailable(t *testing.T, b elect.Backend) {
	ctx := testCtx(t)
	try := func(mode elect.Mode) (*elect.Leadership, error) {
		return b.Acquire(ctx, "ia", elect.Request{Mode: mode, IfAvailable: true})
	}
	x, err := try(elect.Exclusive)
	if err != nil {
		t.Fatalf("IfAvailable on a free lock: %v", err)
	}
	for _, m := range []elect.Mode{elect.Exclusive, elect.Shared} {
		if _, err := try(m); !errors.Is(err, elect.ErrBusy) {
			t.Fatalf("%v IfAvailable beside an exclusive holder: %v, want ErrBusy", m, err)
		}
	}
	release(t, x)
	s1, err := try(elect.Shared)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := try(elect.Shared)
	if err != nil {
		t.Fatalf("shared IfAvailable beside a shared holder: %v", err)
	}
	if _, err := try(elect.Exclusive); !errors.Is(err, elect.ErrBusy) {
		t.Fatalf("exclusive IfAvailable beside shared holders: %v, want ErrBusy", err)
	}
	if got := len(query(t, b, "ia").Pending); got != 0 {
		t.Fatalf("a busy IfAvailable left %d pending requests", got)
	}
	release(t, s1)
	release(t, s2)
	x, err = try(elect.Exclusive)
	if err != nil {
		t.Fatalf("IfAvailable after every holder released: %v", err)
	}
	release(t, x)
}

func testCancelLeavesNothing(t *testing.T, b elect.Backend) {
	ctx := testCtx(t)
	h := acquire(t, ctx, b, "cn", elect.Request{})
	for i := range 5 {
		wctx, cancel := context.WithCancel(ctx)
		w := async(t, wctx, b, "cn", elect.Request{})
		queued(t, b, "cn", 1)
		cancel()
		if err := failed(t, w, "cancelled Acquire"); !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: cancelled Acquire returned %v, want context.Canceled", i, err)
		}
		if s := query(t, b, "cn"); len(s.Pending) != 0 || len(s.Held) != 1 {
			t.Fatalf("round %d: left behind: %+v", i, s)
		}
	}
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := b.Acquire(tctx, "cn", elect.Request{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timed-out Acquire returned %v, want context.DeadlineExceeded", err)
	}
	if s := query(t, b, "cn"); len(s.Pending) != 0 {
		t.Fatalf("a timed-out request left %+v", s.Pending)
	}
	release(t, h)
	l, err := b.Acquire(ctx, "cn", elect.Request{IfAvailable: true})
	if err != nil {
		t.Fatalf("cancelled requests left something in the way: %v", err)
	}
	release(t, l)
}

func testSteal(t *testing.T, b elect.Backend) {
	ctx := testCtx(t)
	h := acquire(t, ctx, b, "st", elect.Request{Command: cmd("h")})
	w := async(t, ctx, b, "st", elect.Request{Command: cmd("w")})
	queued(t, b, "st", 1)
	st := async(t, ctx, b, "st", elect.Request{Steal: true, Command: cmd("thief")})
	ended(t, h, elect.ErrStolen, "stolen holder")
	s := query(t, b, "st")
	if got, want := commands(s.Pending), []string{"thief", "w"}; !slices.Equal(got, want) || !s.Pending[0].Steal {
		t.Fatalf("pending %v (%+v), want %v with the steal first", got, s.Pending, want)
	}
	if len(s.Held) != 1 || s.Held[0].Epoch != h.Epoch() {
		t.Fatalf("the deposed holder still holds until it releases: held %+v", s.Held)
	}
	waiting(t, st, "steal before the deposed holder released")
	release(t, h)
	ls := granted(t, st, "steal")
	if ls.Epoch() <= h.Epoch() {
		t.Fatalf("steal's epoch %d after %d", ls.Epoch(), h.Epoch())
	}
	waiting(t, w, "waiter behind the stealer")
	// A later steal waits behind a stealer that holds; it deposes nobody.
	st2 := async(t, ctx, b, "st", elect.Request{Steal: true, Command: cmd("thief2")})
	queued(t, b, "st", 2)
	waiting(t, st2, "second steal behind a holding stealer")
	if ls.Err() != nil {
		t.Fatalf("a later steal deposed a holding stealer: %v", ls.Err())
	}
	release(t, ls)
	ls2 := granted(t, st2, "second steal")
	release(t, ls2)
	lw := granted(t, w, "waiter after the steals")
	if lw.Epoch() <= ls2.Epoch() {
		t.Fatalf("epoch %d after %d", lw.Epoch(), ls2.Epoch())
	}
	release(t, lw)
}

func testStealSharedHolders(t *testing.T, b elect.Backend) {
	ctx := testCtx(t)
	s1 := acquire(t, ctx, b, "ss", elect.Request{Mode: elect.Shared})
	s2 := acquire(t, ctx, b, "ss", elect.Request{Mode: elect.Shared})
	st := async(t, ctx, b, "ss", elect.Request{Steal: true})
	ended(t, s1, elect.ErrStolen, "first shared holder")
	ended(t, s2, elect.ErrStolen, "second shared holder")
	release(t, s1)
	waiting(t, st, "steal while a deposed holder holds")
	release(t, s2)
	release(t, granted(t, st, "steal"))
}

func testStealAbandoned(t *testing.T, b elect.Backend) {
	ctx := testCtx(t)
	h := acquire(t, ctx, b, "sa", elect.Request{})
	w := async(t, ctx, b, "sa", elect.Request{})
	queued(t, b, "sa", 1)
	sctx, cancel := context.WithCancel(ctx)
	st := async(t, sctx, b, "sa", elect.Request{Steal: true})
	ended(t, h, elect.ErrStolen, "holder")
	queued(t, b, "sa", 2)
	cancel()
	if err := failed(t, st, "abandoned steal"); !errors.Is(err, elect.ErrStealAbandoned) || !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned steal: %v, want ErrStealAbandoned and context.Canceled", err)
	}
	release(t, h)
	release(t, granted(t, w, "waiter after an abandoned steal"))
}
