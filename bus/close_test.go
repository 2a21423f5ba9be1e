package bus

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// Close concurrent with Serve (before it starts, while it starts, while
// members connect) ends Serve promptly and races with nothing (run with
// -race); every later call fails with ErrClosed, never with an error of a
// closed descriptor.
func TestServerCloseConcurrentWithServe(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	dir := t.TempDir()
	for i := range 40 {
		lead, _ := newLead(dir, uint64(i+1))
		s, err := Listen(lead)
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			served <- s.Serve(ctx)
		}()
		go func() {
			defer wg.Done()
			<-start
			if i%2 == 0 {
				// Let a member be connecting while Close runs.
				if c, err := Dial(ctx, dir, testName); err == nil {
					defer c.Close()
				}
			}
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}()
		close(start)
		select {
		case err := <-served:
			if err != nil && !errors.Is(err, ErrClosed) {
				t.Errorf("round %d: Serve returned %v; want nil or ErrClosed", i, err)
			}
		case <-ctx.Done():
			t.Fatalf("round %d: Serve did not return after Close", i)
		}
		wg.Wait()
		if err := s.Serve(ctx); !errors.Is(err, ErrClosed) {
			t.Errorf("Serve after Close: %v; want ErrClosed", err)
		}
		if _, err := s.Publish([]byte("x")); !errors.Is(err, ErrClosed) {
			t.Errorf("Publish after Close: %v; want ErrClosed", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if n := s.Members(); n != 0 {
			t.Errorf("%d members after Close", n)
		}
		lead.Release()
	}
}

// Serve's ctx ending and Close at the same moment: both return, nothing
// races.
func TestServerCloseConcurrentWithCtxEnd(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	dir := t.TempDir()
	for i := range 40 {
		lead, _ := newLead(dir, uint64(i+1))
		s, err := Listen(lead)
		if err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithCancel(ctx)
		served := make(chan error, 1)
		go func() { served <- s.Serve(sctx) }()
		go cancel()
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		select {
		case <-served:
		case <-ctx.Done():
			t.Fatalf("round %d: Serve did not return", i)
		}
		cancel()
		lead.Release()
	}
}
