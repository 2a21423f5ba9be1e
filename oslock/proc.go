package oslock

import (
	"context"
)

// ProcState is what the system says about a process.
type ProcState int

const (
	// ProcUnknown: the platform cannot tell.
	ProcUnknown ProcState = iota
	// ProcRunning: the process exists and is not stopped.
	ProcRunning
	// ProcStopped: the process exists but is stopped (SIGSTOP, a
	// debugger). It still holds its locks.
	ProcStopped
	// ProcGone: no such process.
	ProcGone
)

func (s ProcState) String() string {
	switch s {
	case ProcRunning:
		return "running"
	case ProcStopped:
		return "stopped"
	case ProcGone:
		return "gone"
	}
	return "unknown"
}

// LockHolder is one flock on a file as the kernel reports it.
type LockHolder struct {
	PID       int
	Exclusive bool
}

// Kill sends SIGKILL to pid. It reports ErrUnsupported where the platform
// has no signals.
func Kill(pid int) error { return kill(pid) }

// pollGone is WaitGone where the platform has no process-exit event: a
// bounded poll, as in watch_poll.go.
func pollGone(ctx context.Context, pid int) error {
	var p poller
	for StateOf(pid) != ProcGone {
		if err := p.wait(ctx); err != nil {
			return err
		}
	}
	return nil
}
