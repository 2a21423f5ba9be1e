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
	"os"
	"slices"
	"strings"
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

// wait bounds every wait of the suite.
const wait = 20 * time.Second

// quiet is how long a waiter is watched to confirm that it keeps waiting:
// a check of behaviour, never of speed.
const quiet = 150 * time.Millisecond

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type result struct {
	lead *elect.Leadership
	err  error
}

// async is an Acquire in a goroutine; its result arrives on the channel. A
// leadership nobody took from the channel is released when t ends.
func async(t *testing.T, ctx context.Context, b elect.Backend, name string, req elect.Request) <-chan result {
	ch := make(chan result, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l, err := b.Acquire(ctx, name, req)
		ch <- result{l, err}
	}()
	t.Cleanup(func() {
		<-done
		select {
		case r := <-ch:
			if r.lead != nil {
				r.lead.Release()
			}
		default:
		}
	})
	return ch
}

func granted(t *testing.T, ch <-chan result, what string) *elect.Leadership {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.lead
	case <-time.After(wait):
		t.Fatalf("%s: not granted within %v", what, wait)
	}
	return nil
}

func failed(t *testing.T, ch <-chan result, what string) error {
	t.Helper()
	select {
	case r := <-ch:
		if r.err == nil {
			r.lead.Release()
			t.Fatalf("%s: granted, want an error", what)
		}
		return r.err
	case <-time.After(wait):
		t.Fatalf("%s: no answer within %v", what, wait)
	}
	return nil
}

func waiting(t *testing.T, ch <-chan result, what string) {
	t.Helper()
	select {
	case r := <-ch:
		if r.lead != nil {
			r.lead.Release()
		}
		t.Fatalf("%s: answered (%v) while it should wait", what, r.err)
	case <-time.After(quiet):
	}
}

func acquire(t *testing.T, ctx context.Context, b elect.Backend, name string, req elect.Request) *elect.Leadership {
	t.Helper()
	l, err := b.Acquire(ctx, name, req)
	if err != nil {
		t.Fatalf("Acquire(%s, %+v): %v", name, req, err)
	}
	return l
}

func query(t *testing.T, b elect.Backend, name string) elect.Snapshot {
	t.Helper()
	s, err := b.Query(context.Background(), name)
	if err != nil {
		t.Fatalf("Query(%s): %v", name, err)
	}
	return s
}

// queued waits until name has n pending requests.
func queued(t *testing.T, b elect.Backend, name string, n int) elect.Snapshot {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		s := query(t, b, name)
		if len(s.Pending) == n {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d pending, want %d: %+v", name, len(s.Pending), n, s.Pending)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func ended(t *testing.T, l *elect.Leadership, cause error, what string) {
	t.Helper()
	select {
	case <-l.Done():
		if !errors.Is(l.Err(), cause) {
			t.Fatalf("%s: term ended with %v, want %v", what, l.Err(), cause)
		}
	case <-time.After(wait):
		t.Fatalf("%s: term did not end within %v", what, wait)
	}
}

func release(t *testing.T, l *elect.Leadership) {
	t.Helper()
	if err := l.Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func cmd(s string) []string { return []string{"electtest", s} }

func commands(ps []elect.Pending) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Command[len(p.Command)-1])
	}
	return out
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

func testEpochsGrow(t *testing.T, b elect.Backend) {
	ctx := testCtx(t)
	var epochs []uint64
	take := func(l *elect.Leadership) *elect.Leadership {
		epochs = append(epochs, l.Epoch())
		return l
	}
	for range 3 {
		release(t, take(acquire(t, ctx, b, "ep", elect.Request{})))
	}
	s1 := take(acquire(t, ctx, b, "ep", elect.Request{Mode: elect.Shared}))
	s2 := take(acquire(t, ctx, b, "ep", elect.Request{Mode: elect.Shared}))
	st := async(t, ctx, b, "ep", elect.Request{Steal: true})
	ended(t, s1, elect.ErrStolen, "shared holder")
	release(t, s1)
	release(t, s2)
	ls := take(granted(t, st, "steal"))
	release(t, ls)
	release(t, take(acquire(t, ctx, b, "ep", elect.Request{IfAvailable: true})))
	for i := 1; i < len(epochs); i++ {
		if epochs[i] <= epochs[i-1] {
			t.Fatalf("epochs in grant order %v: not strictly growing", epochs)
		}
	}
	// On the flock backend's scale: at least the wall clock in
	// microseconds at the first grant.
	if floor := uint64(time.Now().Add(-time.Hour).UnixMicro()); epochs[0] < floor {
		t.Fatalf("epoch %d is below the clock in microseconds (%d)", epochs[0], floor)
	}
}

func testQueryShape(t *testing.T, b elect.Backend) {
	ctx := testCtx(t)
	if s := query(t, b, "qs"); s.Held == nil || s.Pending == nil || len(s.Held)+len(s.Pending) != 0 {
		t.Fatalf("an unused name: %+v, want empty, non-nil lists", s)
	}
	before := time.Now()
	h := acquire(t, ctx, b, "qs", elect.Request{Command: cmd("holder")})
	after := time.Now()
	async(t, ctx, b, "qs", elect.Request{Mode: elect.Shared, Command: cmd("waiter")})
	s := queued(t, b, "qs", 1)
	if len(s.Held) != 1 {
		t.Fatalf("held %+v", s.Held)
	}
	hd := s.Held[0]
	if hd.Name != "qs" || hd.Mode != elect.Exclusive || hd.PID != os.Getpid() || hd.Epoch != h.Epoch() ||
		!slices.Equal(hd.Command, cmd("holder")) || hd.Since.Before(before.Add(-time.Second)) || hd.Since.After(after.Add(time.Second)) || hd.External {
		t.Fatalf("holder %+v; want qs, exclusive, pid %d, epoch %d, since %v, command %v", hd, os.Getpid(), h.Epoch(), before, cmd("holder"))
	}
	if !h.Since().Equal(hd.Since) && h.Since().Sub(hd.Since).Abs() > time.Second {
		t.Fatalf("Leadership.Since %v, Query %v", h.Since(), hd.Since)
	}
	p := s.Pending[0]
	if p.Name != "qs" || p.Mode != elect.Shared || p.PID != os.Getpid() || p.Ticket == 0 || p.Since.IsZero() || !slices.Equal(p.Command, cmd("waiter")) || p.Steal {
		t.Fatalf("pending %+v", p)
	}
	release(t, h)
}

func testReleaseIdempotent(t *testing.T, b elect.Backend) {
	ctx := testCtx(t)
	l := acquire(t, ctx, b, "ri", elect.Request{})
	if l.Err() != nil {
		t.Fatalf("Err while held: %v", l.Err())
	}
	release(t, l)
	if err := l.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if !errors.Is(l.Err(), elect.ErrReleased) || !errors.Is(context.Cause(l.Context()), elect.ErrReleased) {
		t.Fatalf("after Release: Err %v, cause %v", l.Err(), context.Cause(l.Context()))
	}
	if s := query(t, b, "ri"); len(s.Held) != 0 {
		t.Fatalf("released but held: %+v", s.Held)
	}
}

func testElectorAbdicate(t *testing.T, b elect.Backend) {
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	var mu sync.Mutex
	var roles []string
	e := &elect.Elector{Backend: b, Name: "el", Requeue: true, OnRole: func(r elect.Role, _ *elect.Leadership) {
		mu.Lock()
		roles = append(roles, r.String())
		mu.Unlock()
	}}
	terms := make(chan uint64, 10)
	done := make(chan error, 1)
	go func() {
		done <- e.Run(ctx, func(ctx context.Context, l *elect.Leadership) error {
			terms <- l.Epoch()
			<-ctx.Done()
			return context.Cause(ctx)
		})
	}()
	next := func() uint64 {
		select {
		case ep := <-terms:
			return ep
		case <-time.After(wait):
			t.Fatal("Elector did not lead")
		}
		return 0
	}
	first := next()
	e.Abdicate()
	if second := next(); second <= first {
		t.Fatalf("epochs %d then %d", first, second)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("Run did not return")
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(roles, ","); got != "follower,leader,follower,leader,stopped" {
		t.Fatalf("roles: %s", got)
	}
}

func testInvalidInput(t *testing.T, b elect.Backend) {
	ctx := testCtx(t)
	for _, name := range []string{"", "a/b", "..", "-x", "a b", strings.Repeat("n", elect.MaxNameLen+1)} {
		if _, err := b.Acquire(ctx, name, elect.Request{}); !errors.Is(err, elect.ErrInvalidName) {
			t.Errorf("Acquire(%q): %v, want ErrInvalidName", name, err)
		}
		if _, err := b.Query(ctx, name); !errors.Is(err, elect.ErrInvalidName) {
			t.Errorf("Query(%q): %v, want ErrInvalidName", name, err)
		}
		e := &elect.Elector{Backend: b, Name: name}
		if err := e.Run(ctx, func(context.Context, *elect.Leadership) error { return nil }); !errors.Is(err, elect.ErrInvalidName) {
			t.Errorf("Elector.Run(%q): %v, want ErrInvalidName", name, err)
		}
	}
	for _, req := range []elect.Request{
		{Steal: true, IfAvailable: true},
		{Steal: true, Mode: elect.Shared},
		{KillAfter: time.Second},
		{Steal: true, KillAfter: -time.Second},
		{Mode: elect.Mode(7)},
	} {
		if _, err := b.Acquire(ctx, "iv", req); !errors.Is(err, elect.ErrInvalidRequest) {
			t.Errorf("Acquire(%+v): %v, want ErrInvalidRequest", req, err)
		}
	}
	if s := query(t, b, "iv"); len(s.Held)+len(s.Pending) != 0 {
		t.Errorf("invalid requests left %+v", s)
	}
}

// checkQueryAll checks testQueryAll's snapshot: qa1 held by h1, qa2 by
// h2, and the waiter of qa1 pending.
func checkQueryAll(t *testing.T, s elect.Snapshot, h1, h2 *elect.Leadership) {
	t.Helper()
	held := map[string]elect.Holder{}
	for _, h := range s.Held {
		held[h.Name] = h
	}
	if len(s.Held) != 2 || held["qa1"].Epoch != h1.Epoch() || held["qa1"].Mode != elect.Exclusive ||
		held["qa2"].Epoch != h2.Epoch() || held["qa2"].Mode != elect.Shared {
		t.Fatalf("QueryAll held %+v; want qa1 (exclusive, epoch %d) and qa2 (shared, epoch %d)", s.Held, h1.Epoch(), h2.Epoch())
	}
	if len(s.Pending) != 1 || s.Pending[0].Name != "qa1" || !slices.Equal(s.Pending[0].Command, cmd("waiter")) {
		t.Fatalf("QueryAll pending %+v; want the waiter of qa1", s.Pending)
	}
}

// testQueryAll: QueryAll holds what Query of each name holds, for every
// name the backend knows, and nothing of a name once its terms are over.
func testQueryAll(t *testing.T, b elect.Backend) {
	qa, ok := b.(QueryAller)
	if !ok {
		t.Skip("the backend has no QueryAll")
	}
	ctx := testCtx(t)
	h1 := acquire(t, ctx, b, "qa1", elect.Request{Command: cmd("holder1")})
	h2 := acquire(t, ctx, b, "qa2", elect.Request{Mode: elect.Shared, Command: cmd("holder2")})
	async(t, ctx, b, "qa1", elect.Request{Command: cmd("waiter")})
	queued(t, b, "qa1", 1)
	s, err := qa.QueryAll(ctx)
	if err != nil {
		t.Fatalf("QueryAll: %v", err)
	}
	checkQueryAll(t, s, h1, h2)
	release(t, h2)
	deadline := time.Now().Add(wait)
	for {
		s, err = qa.QueryAll(ctx)
		if err != nil {
			t.Fatalf("QueryAll: %v", err)
		}
		if !slices.ContainsFunc(s.Held, func(h elect.Holder) bool { return h.Name == "qa2" }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("qa2 still held %v after its release: %+v", wait, s.Held)
		}
		time.Sleep(5 * time.Millisecond)
	}
	release(t, h1)
}
