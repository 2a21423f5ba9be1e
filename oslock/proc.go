package oslock

import (
	"bytes"
	"context"
	"os"
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

// LockTable returns the flock holders of every locked inode, from
// /proc/locks on Linux. Reading it takes no lock and wakes nobody.
// Elsewhere it returns ErrUnsupported.
func LockTable() (map[FileID][]LockHolder, error) { return sysLockTable() }

// FlockWaiters returns the pids blocked in flock(2) on some file, from
// /proc/locks on Linux; elsewhere it returns ErrUnsupported.
func FlockWaiters() (map[int]bool, error) { return sysFlockWaiters() }

// StateOf says what pid is doing: gone (no process, or a zombie), stopped,
// or running, from /proc on Linux. Elsewhere it tells only whether pid
// exists (ProcGone or ProcUnknown).
func StateOf(pid int) ProcState { return sysStateOf(pid) }

// StatNumber returns field n (from 1, as proc(5) counts) of
// /proc/PID/stat as a number: 4 is the parent's pid, 5 the process
// group, 22 the start time in clock ticks after boot, which, with the pid,
// names one process whatever pids are reused. ok is false when pid is
// gone, the field is no number, or off Linux.
func StatNumber(pid, n int) (v uint64, ok bool) { return sysStatNumber(pid, n) }

// StatField returns field n (from 1, as proc(5) counts) of st, a
// /proc/PID/stat line, or nil. Fields from 3 on follow the command name,
// which is in parentheses and may itself contain ") ". It is the one
// parser of that line: StateOf and StatNumber use it too.
func StatField(st []byte, n int) []byte {
	i := bytes.LastIndexByte(st, ')')
	if i < 0 || n < 3 {
		return nil
	}
	st = st[i+1:]
	for k := 3; ; k++ {
		st = bytes.TrimLeft(st, " ")
		j := bytes.IndexAny(st, " \n")
		if j < 0 {
			j = len(st)
		}
		if k == n {
			return st[:j]
		}
		if j == len(st) {
			return nil
		}
		st = st[j:]
	}
}

// Cmdline returns pid's command line, or nil where the platform does not
// say (off Linux) or the process is gone.
func Cmdline(pid int) []string { return sysCmdline(pid) }

// UIDOf returns pid's real uid, or -1 where the platform does not say
// (off Linux) or the process is gone.
func UIDOf(pid int) int { return sysUIDOf(pid) }

// WaitGone blocks until pid is gone or ctx ends: on Linux through a pidfd,
// in the netpoller; elsewhere with a bounded poll. Where processes cannot
// be observed at all it returns at once.
func WaitGone(ctx context.Context, pid int) error { return sysWaitGone(ctx, pid) }

// OpenPidfd returns a pidfd of pid (pidfd_open(2), Linux 5.3), which keeps
// naming that process even once its pid is reused. Off Linux it returns
// ErrUnsupported.
func OpenPidfd(pid int) (*os.File, error) { return sysOpenPidfd(pid) }

// WaitPidfd blocks until the process of pidfd, from OpenPidfd, has exited
// with all its threads (a zombie counts), or ctx ends. It sleeps in the
// netpoller: a pidfd becomes readable when its process exits.
func WaitPidfd(ctx context.Context, pidfd *os.File) error { return sysWaitPidfd(ctx, pidfd) }

// pollGone is WaitGone where the platform has no process-exit event: a
// bounded poll, as in watch_poll.go.
func pollGone(ctx context.Context, pid int) error {
	var p Poller
	for StateOf(pid) != ProcGone {
		if err := p.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}
