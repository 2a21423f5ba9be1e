package instance

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors, checked with errors.Is.
var (
	// ErrNotResponding: a primary holds the name but did not accept this
	// invocation within Options.AckTimeout (it is stopped, hung, or not
	// reading its invocations). The error is a *NotRespondingError that
	// names the primary. Nothing ran; set Options.Replace to take over.
	ErrNotResponding = errors.New("instance: the primary is not responding")
	// ErrAcceptedLost: the primary accepted this invocation and then
	// ended (died, or returned) before it said it was done. The
	// invocation may have run in part; it is not run again, here or
	// anywhere, because a retry could run it twice.
	ErrAcceptedLost = errors.New("instance: the primary accepted the invocation, then ended before finishing it")
	// ErrNotInstance: the name is held by a process that is not a
	// single-instance primary (a plain elect holder or `leaderrun -n`),
	// which cannot take invocations.
	ErrNotInstance = errors.New("instance: the holder of the name does not take invocations")
	// ErrNoPrimary: with Options.ForwardOnly, nobody holds the name.
	ErrNoPrimary = errors.New("instance: no primary is running")
	// ErrForeign: the primary runs as another user; invocations are
	// never forwarded across users.
	ErrForeign = errors.New("instance: the primary runs as another user")
)

// NotRespondingError says which primary did not accept an invocation in
// time, and in what state it was: "stopped" (SIGSTOP, a debugger, a
// frozen cgroup), "running" (busy or not reading its invocations), or
// "unknown".
type NotRespondingError struct {
	Name  string
	PID   int // 0 when no holder could be seen
	State string
	Epoch uint64
	Since time.Time
	Wait  time.Duration // how long this invocation waited
}

func (e *NotRespondingError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("instance: no primary of %s accepted the invocation within %v, and nobody could be seen holding it", e.Name, e.Wait)
	}
	return fmt.Sprintf("instance: primary of %s, pid %d (epoch %d, since %s), did not accept the invocation within %v; state %s (replace it with Options.Replace)",
		e.Name, e.PID, e.Epoch, e.Since.Format(time.RFC3339), e.Wait, e.State)
}

func (e *NotRespondingError) Is(target error) bool { return target == ErrNotResponding }
