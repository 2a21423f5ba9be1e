package electtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
)

// The suite's helpers: every wait bounded, every leadership released when
// the subtest ends.

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
