package oslock

import (
	"context"
	"time"
)

// poller is the fallback where there is no event to sleep on (a platform
// whose runtime does not poll FIFOs, a process without a pidfd): each wait
// is a sleep that doubles from 1ms up to 100ms.
type poller struct{ delay time.Duration }

func (p *poller) wait(ctx context.Context) error {
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
