//go:build !unix

package oslock

import (
	"context"
)

// LockTable is not available on this platform.
func LockTable() (map[FileID][]LockHolder, error) { return nil, ErrUnsupported }

// FlockWaiters is not available on this platform.
func FlockWaiters() (map[int]bool, error) { return nil, ErrUnsupported }

// StateOf cannot tell on this platform.
func StateOf(pid int) ProcState { return ProcUnknown }

// Cmdline is not available on this platform.
func Cmdline(pid int) []string { return nil }

// UIDOf is not available on this platform.
func UIDOf(pid int) int { return -1 }

func kill(pid int) error { return ErrUnsupported }

// WaitGone cannot tell on this platform and returns at once.
func WaitGone(ctx context.Context, pid int) error { return nil }
