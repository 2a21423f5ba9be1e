package oslock

import (
	"context"
	"time"
)

// Poller is the fallback where there is no event to sleep on (a platform
// whose runtime does not poll FIFOs, a process without a pidfd, a lock
// holder nobody can see): each Wait is a sleep that doubles from 1ms up
// to 100ms, or until ctx ends (it then returns ctx's cause). The zero
// value is ready to use.
type Poller struct{ delay time.Duration }

// Polling reports whether Wait was called since the Poller was made or
// Reset.
func (p *Poller) Polling() bool { return p.delay != 0 }

// Reset starts the back-off over, from 1ms.
func (p *Poller) Reset() { p.delay = 0 }

// Wait sleeps for the next step of the back-off.
func (p *Poller) Wait(ctx context.Context) error {
	switch {
	case p.delay == 0:
		p.delay = time.Millisecond
	case p.delay < 100*time.Millisecond:
		p.delay = min(2*p.delay, 100*time.Millisecond)
	}
	t := time.NewTimer(p.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
