package elect

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// lossyBackend grants terms that end at once with cause, and fails its
// first Acquire with ErrSessionLost.
type lossyBackend struct {
	mu    sync.Mutex
	calls int
	cause error
}

func (b *lossyBackend) Acquire(ctx context.Context, name string, req Request) (*Leadership, error) {
	b.mu.Lock()
	b.calls++
	n := b.calls
	b.mu.Unlock()
	if n == 1 {
		return nil, ErrSessionLost
	}
	l, end := NewLeadership(Term{Name: name, Epoch: uint64(n), Since: time.Now(), Release: func() error { return nil }})
	end(b.cause)
	return l, nil
}

func (b *lossyBackend) Query(ctx context.Context, name string) (Snapshot, error) {
	return Snapshot{}, nil
}

// TestElectorRequeuesLostTerms: with Requeue, a request whose session was
// lost and terms that end because the lock file or the session was lost
// are followed by a new request, as a stolen term is.
func TestElectorRequeuesLostTerms(t *testing.T) {
	for _, cause := range []error{ErrLockLost, ErrSessionLost, ErrStolen} {
		b := &lossyBackend{cause: cause}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		terms := 0
		err := (&Elector{Backend: b, Name: "rq", Requeue: true}).Run(ctx, func(ctx context.Context, l *Leadership) error {
			<-ctx.Done()
			if terms++; terms == 3 {
				cancel()
			}
			return context.Cause(ctx)
		})
		cancel()
		if err != nil || terms != 3 {
			t.Errorf("%v: Run = %v after %d terms; want nil after 3", cause, err, terms)
		}
	}
	// Without Requeue a lost session is the caller's to see.
	err := (&Elector{Backend: &lossyBackend{}, Name: "rq"}).Run(t.Context(), func(context.Context, *Leadership) error { return nil })
	if !errors.Is(err, ErrSessionLost) {
		t.Errorf("without Requeue: Run = %v; want ErrSessionLost", err)
	}
}
