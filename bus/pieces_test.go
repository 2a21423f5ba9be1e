package bus

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
)

// TestLazyDialElectorRetained: a process dials lazily before any leader,
// then campaigns itself with RunElector; its client connects to its own
// server, gets the retained value, and later updates as messages.
func TestLazyDialElectorRetained(t *testing.T) {
	ctx := testCtx(t, 20*time.Second)
	dir := t.TempDir()
	os.Chmod(dir, 0o700)
	c, err := DialLazy(dir, testName)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.Leader(); ok {
		t.Fatal("connected with no leader")
	}
	if err := c.Publish(ctx, []byte("x")); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Publish with no leader: %v", err)
	}
	lk, err := elect.Open(elect.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	e := &elect.Elector{Backend: lk, Name: testName}
	ectx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	retainedSeq := make(chan uint64, 1)
	update := make(chan struct{})
	go func() {
		ran <- RunElector(ectx, e, func(ctx context.Context, l *elect.Leadership, s *Server) error {
			seq, err := s.Retain([]byte("state-1"))
			if err != nil {
				return err
			}
			retainedSeq <- seq
			<-update
			if _, err := s.Retain([]byte("state-2")); err != nil {
				return err
			}
			<-ctx.Done()
			return nil
		})
	}()
	ev := nextKind(t, ctx, c, EventLeader)
	if ev.Leader.PID != os.Getpid() {
		t.Fatalf("leader pid %d", ev.Leader.PID)
	}
	seq := <-retainedSeq
	data, got, err := c.Retained(ctx)
	if err != nil || string(data) != "state-1" || got != seq {
		t.Fatalf("Retained: %q seq %d (want %d), %v", data, got, seq, err)
	}
	close(update)
	for {
		ev := nextKind(t, ctx, c, EventMessage)
		if v, ok := RetainedUpdate(ev.Message); ok && ev.Message.Seq > got {
			if string(v) != "state-2" && string(v) != "state-1" {
				t.Fatalf("update %q", v)
			}
			if string(v) == "state-2" {
				break
			}
		}
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("RunElector: %v", err)
	}
}

func TestRetainedNone(t *testing.T) {
	ctx := testCtx(t, 10*time.Second)
	dir := t.TempDir()
	os.Chmod(dir, 0o700)
	startServer(t, dir, 1)
	c := dial(t, ctx, dir)
	if _, _, err := c.Retained(ctx); !errors.Is(err, ErrNoRetained) {
		t.Fatalf("no retained value: %v", err)
	}
}
