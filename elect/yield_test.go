package elect

import (
	"context"
	"slices"
	"testing"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

func TestYield(t *testing.T) {
	l, _ := testLocker(t)
	ctx := testCtx(t)
	visible := func(p Pending) bool { return slices.Contains(p.Labels, "visible") }
	e := &Elector{Backend: l, Name: "y"}
	leading := make(chan *Leadership, 1)
	ended := make(chan error, 1)
	go func() {
		ended <- e.Run(ctx, func(ctx context.Context, lead *Leadership) error {
			leading <- lead
			<-ctx.Done()
			return nil
		})
	}()
	lead := <-leading
	// Alone: no hand-over, no new term.
	if ok, err := e.Yield(ctx, visible); ok || err != nil {
		t.Fatalf("alone: Yield %v, %v", ok, err)
	}
	if e.Leadership() != lead || lead.Err() != nil {
		t.Fatal("Yield alone ended the term")
	}
	// A hidden follower is not handed the lock; a visible one is, once
	// it heads the line.
	l2, _ := Open(Config{Dir: l.Dir()})
	defer l2.Close()
	hctx, hcancel := context.WithCancel(ctx)
	hidden := make(chan error, 1)
	go func() {
		_, err := l2.Acquire(hctx, "y", Request{Labels: []string{"hidden"}})
		hidden <- err
	}()
	proctest.Eventually(t, "the hidden follower queued", func() bool { return len(pending(t, l, "y")) == 1 })
	if ok, _ := e.Yield(ctx, visible); ok {
		t.Fatal("yielded to a hidden follower")
	}
	hcancel()
	<-hidden
	granted := make(chan *Leadership, 1)
	go func() {
		lead, err := l2.Acquire(ctx, "y", Request{Labels: []string{"visible"}})
		if err != nil {
			t.Error(err)
		}
		granted <- lead
	}()
	proctest.Eventually(t, "the visible follower queued", func() bool { return len(pending(t, l, "y")) == 1 })
	if ok, err := e.Yield(ctx, visible); !ok || err != nil {
		t.Fatalf("visible follower: Yield %v, %v", ok, err)
	}
	next := <-granted
	if next.Epoch() <= lead.Epoch() {
		t.Fatalf("the follower's epoch %d is not above %d", next.Epoch(), lead.Epoch())
	}
	if err := <-ended; err != nil {
		t.Fatalf("Run after Yield: %v", err)
	}
	next.Release()
}
