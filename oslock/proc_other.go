//go:build (darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd) && !linux

package oslock

import (
	"context"
	"os"
	"syscall"
)

func sysLockTable() (map[FileID][]LockHolder, error) { return nil, ErrUnsupported }

func sysFlockWaiters() (map[int]bool, error) { return nil, ErrUnsupported }

func sysStateOf(pid int) ProcState {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return ProcGone
	}
	return ProcUnknown
}

func sysCmdline(pid int) []string { return nil }

func sysStatNumber(pid, n int) (uint64, bool) { return 0, false }

func sysUIDOf(pid int) int { return -1 }

func kill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

func sysWaitGone(ctx context.Context, pid int) error { return pollGone(ctx, pid) }

func sysOpenPidfd(pid int) (*os.File, error) { return nil, ErrUnsupported }

func sysWaitPidfd(ctx context.Context, pidfd *os.File) error { return ErrUnsupported }
