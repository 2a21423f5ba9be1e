//go:build unix && !linux

package oslock

import (
	"context"
	"syscall"
)

// LockTable is not available on this platform.
func LockTable() (map[FileID][]LockHolder, error) { return nil, ErrUnsupported }

// FlockWaiters is not available on this platform.
func FlockWaiters() (map[int]bool, error) { return nil, ErrUnsupported }

// StateOf tells only whether pid exists.
func StateOf(pid int) ProcState {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return ProcGone
	}
	return ProcUnknown
}

// Cmdline is not available on this platform.
func Cmdline(pid int) []string { return nil }

// UIDOf is not available on this platform.
func UIDOf(pid int) int { return -1 }

func kill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// WaitGone blocks until pid is gone or ctx ends; a bounded poll here.
func WaitGone(ctx context.Context, pid int) error { return pollGone(ctx, pid) }
