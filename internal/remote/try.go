package remote

import (
	"context"
	"errors"

	"github.com/leaderrun/leaderrun/elect"
)

// TryAcquire asks b once for name in mode and never waits: ok false and
// no error when the lock is held or others are queued (elect.ErrBusy).
// The lease backends' TryAcquire.
func TryAcquire(ctx context.Context, b elect.Backend, name string, mode elect.Mode) (*elect.Leadership, bool, error) {
	lead, err := b.Acquire(ctx, name, elect.Request{Mode: mode, IfAvailable: true})
	if errors.Is(err, elect.ErrBusy) {
		return nil, false, nil
	}
	return lead, err == nil, err
}
