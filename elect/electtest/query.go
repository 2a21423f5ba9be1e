package electtest

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
)

// The subtests of what a backend reports: epochs, Query, QueryAll, and
// the edges of the API (Release twice, Elector, bad input).

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
