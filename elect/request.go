package elect

import (
	"fmt"
	"time"
)

// Request says how to ask for a lock, as navigator.locks.request's options
// do. The zero value waits in line for an exclusive lock.
type Request struct {
	// Mode is Exclusive (default) or Shared.
	Mode Mode
	// IfAvailable asks once and never waits: if the lock cannot be
	// granted at once, Acquire returns ErrBusy.
	IfAvailable bool
	// Steal ends the current holders' terms with ErrStolen and takes the
	// lock ahead of everyone queued. Holders keep the kernel lock until
	// they release it; see KillAfter. Exclusive only.
	Steal bool
	// KillAfter, with Steal, sends SIGKILL to holders (of the same user)
	// that still hold the lock this long after the steal. Zero (default)
	// waits for them to release however long it takes. After the SIGKILL
	// the steal still waits for the kernel to drop the lock, which a
	// process stuck in uninterruptible sleep (state D) can put off without
	// bound: only the request's ctx bounds that wait.
	KillAfter time.Duration
	// StealStopped, when positive, recovers the name from a holder that
	// has been stopped (SIGSTOP, Ctrl-Z, a frozen cgroup) for this long
	// while this request heads the line behind it: the holder's term is
	// ended as by a steal and it is killed with SIGKILL (same user only;
	// another user's gives ErrForeignHolder). While it heads the line
	// behind a holder, the request checks the holder's state every
	// quarter of StealStopped: opt-in polling, only then. Zero (default):
	// a stopped holder is waited for.
	StealStopped time.Duration
	// Command is recorded for Query and `leaderrun status`. Default:
	// os.Args.
	Command []string
	// OnPolling, if set, is called (from Acquire's goroutine, once per
	// request) when the request finds nothing to sleep on and falls back
	// to polling every 1ms to 100ms, with why. Query shows such a request
	// as Polling too.
	OnPolling func(why string)
	// Labels are recorded with the request for Query (Pending.Labels,
	// Holder.Labels), so that a leader deciding whether to Yield can
	// tell its followers apart ("visible", "on-battery"). At most 16 of
	// at most 64 bytes each. They are fixed for the request's life: a
	// follower whose labels change asks again (joining the tail).
	Labels []string
}

// Validate reports, as an error matching ErrInvalidRequest, what makes r
// a request no backend takes: an unknown mode, a steal that is shared or
// try-only, a negative or unpaired KillAfter or StealStopped, or labels
// over their bounds. Every backend checks a Request with it.
func (r Request) Validate() error { return r.validate() }

func (r Request) validate() error {
	switch {
	case r.Mode != Exclusive && r.Mode != Shared:
		return fmt.Errorf("%w: unknown mode %d", ErrInvalidRequest, r.Mode)
	case r.Steal && r.IfAvailable:
		return fmt.Errorf("%w: steal cannot be combined with if-available (try-only)", ErrInvalidRequest)
	case r.Steal && r.Mode == Shared:
		return fmt.Errorf("%w: steal cannot be combined with shared mode", ErrInvalidRequest)
	case r.StealStopped < 0:
		return fmt.Errorf("%w: negative StealStopped", ErrInvalidRequest)
	case r.StealStopped > 0 && r.IfAvailable:
		return fmt.Errorf("%w: StealStopped cannot be combined with if-available (try-only)", ErrInvalidRequest)
	case r.KillAfter < 0:
		return fmt.Errorf("%w: negative KillAfter", ErrInvalidRequest)
	case r.KillAfter > 0 && !r.Steal:
		return fmt.Errorf("%w: KillAfter needs Steal", ErrInvalidRequest)
	case len(r.Labels) > 16:
		return fmt.Errorf("%w: %d labels, at most 16", ErrInvalidRequest, len(r.Labels))
	}
	for _, lb := range r.Labels {
		if len(lb) > 64 {
			return fmt.Errorf("%w: label of %d bytes, at most 64", ErrInvalidRequest, len(lb))
		}
	}
	return nil
}
