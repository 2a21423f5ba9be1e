package elect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/layout"
	"github.com/leaderrun/leaderrun/internal/proctest"
	"github.com/leaderrun/leaderrun/oslock"
)

// The benchmarks compare leaderrun with the tools it replaces, each run as
// the same re-executed test binary (role "bench") so that process start-up
// costs the same for all of them:
//
//	leaderrun  Locker.Acquire, sleeping on inotify close events
//	flock2     a blocking flock(2) LOCK_EX, woken by the kernel
//	gofrs10    gofrs/flock TryLockContext polling every 10ms
//	gofrs100   gofrs/flock TryLockContext polling every 100ms
//
// A bench child prints "waiting", takes the lock, prints "led NS" with
// CLOCK_MONOTONIC (comparable across processes), and then either releases
// and exits, or with B_HOLD holds the lock until its stdin closes.
var benchTools = []string{"leaderrun", "flock2", "gofrs10", "gofrs100"}

func benchRole() int {
	fmt.Println("waiting")
	release, err := benchAcquire(os.Getenv("B_TOOL"), os.Getenv("B_DIR"), os.Getenv("B_NAME"))
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	fmt.Println("led", monoNow())
	if os.Getenv("B_HOLD") != "" {
		io.Copy(io.Discard, os.Stdin)
	}
	release()
	return 0
}

func benchAcquire(tool, dir, name string) (release func() error, err error) {
	file := layout.LockPath(dir, name)
	switch tool {
	case "leaderrun1000":
		// One process holding 1000 names (name-0 ... name-999).
		l, err := Open(Config{Dir: dir})
		if err != nil {
			return nil, err
		}
		var leads []*Leadership
		for i := range 1000 {
			lead, err := l.Acquire(context.Background(), fmt.Sprintf("%s-%d", name, i), Request{})
			if err != nil {
				l.Close()
				return nil, err
			}
			leads = append(leads, lead)
		}
		return func() error {
			for _, lead := range leads {
				lead.Release()
			}
			return l.Close()
		}, nil
	case "leaderrun":
		l, err := Open(Config{Dir: dir})
		if err != nil {
			return nil, err
		}
		lead, err := l.Acquire(context.Background(), name, Request{})
		if err != nil {
			return nil, err
		}
		return lead.Release, nil
	case "flock2":
		f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		for {
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
			if err != unix.EINTR {
				break
			}
		}
		if err != nil {
			return nil, err
		}
		return f.Close, nil
	case "gofrs10", "gofrs100":
		every := 10 * time.Millisecond
		if tool == "gofrs100" {
			every = 100 * time.Millisecond
		}
		fl := flock.New(file)
		ok, err := fl.TryLockContext(context.Background(), every)
		if err == nil && !ok {
			err = errors.New("not locked")
		}
		if err != nil {
			return nil, err
		}
		return fl.Unlock, nil
	}
	return nil, fmt.Errorf("unknown tool %q", tool)
}

func monoNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// startBench starts a bench child of tool on name in dir.
func startBench(b *testing.B, tool, dir, name string, hold bool) *proctest.Proc {
	b.Helper()
	env := []string{"B_TOOL=" + tool, "B_DIR=" + dir, "B_NAME=" + name}
	if hold {
		env = append(env, "B_HOLD=1")
	}
	return proctest.StartRole(b, tool, "bench", env...)
}

// expectWithin waits (at most d) for the next line, which must start
// with prefix, and returns the rest of it.
func expectWithin(p *proctest.Proc, prefix string, d time.Duration) (string, error) {
	line, ok := p.Next(d)
	if !ok {
		return "", fmt.Errorf("pid %d: no %q within %v (or it exited)", p.PID(), prefix, d)
	}
	rest, found := strings.CutPrefix(line, prefix)
	if !found {
		return "", fmt.Errorf("pid %d said %q, wanted %q", p.PID(), line, prefix)
	}
	return strings.TrimSpace(rest), nil
}

// ledAt waits for "led NS" and returns NS.
func ledAt(p *proctest.Proc, d time.Duration) (int64, error) {
	s, err := expectWithin(p, "led", d)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

// cpu is the user+system CPU time of a reaped p.
func cpu(p *proctest.Proc) time.Duration {
	ru, ok := p.Cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// waitReady returns once p waits for the lock: its ticket is queued
// (leaderrun, nth ticket counting the holder's), it is blocked in flock(2)
// according to /proc/locks, or, for a polling tool, it has said "waiting"
// and made its first try. flock(1) says nothing before it waits.
func waitReady(b *testing.B, p *proctest.Proc, tool, dir, name string, nth int) {
	b.Helper()
	if tool != "flock1" {
		p.Expect("waiting")
	}
	var ready func() bool
	switch tool {
	case "leaderrun":
		ready = func() bool { return countTickets(dir, name) >= nth }
	case "flock2", "flock1":
		ready = func() bool { return blockedInFlock(p.PID()) }
	default:
		time.Sleep(time.Millisecond)
		return
	}
	proctest.Eventually(b, fmt.Sprintf("pid %d (%s) waiting", p.PID(), tool), ready)
}

func countTickets(dir, name string) int {
	f, err := os.Open(filepath.Join(dir, name+queueSuffix))
	if err != nil {
		return 0
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	n := 0
	for _, s := range names {
		if _, ok := parseTicket(s); ok {
			n++
		}
	}
	return n
}

// blockedInFlock reports whether the kernel lists pid as waiting in
// flock(2).
func blockedInFlock(pid int) bool {
	w, _ := oslock.FlockWaiters()
	return w[pid]
}
