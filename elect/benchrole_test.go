package elect

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"golang.org/x/sys/unix"

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
	file := LockPath(dir, name)
	switch tool {
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

// benchProc is a bench child, or any command watched the same way.
type benchProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	pid   int
}

// startBench starts a bench child of tool on name in dir.
func startBench(b *testing.B, tool, dir, name string, hold bool) *benchProc {
	b.Helper()
	cmd := roleCommand("bench", "B_TOOL="+tool, "B_DIR="+dir, "B_NAME="+name)
	if hold {
		cmd.Env = append(cmd.Env, "B_HOLD=1")
	}
	return startWatched(b, cmd, hold)
}

// startWatched starts cmd with its stdout read line by line; with stdin
// the caller may close it to end the process.
func startWatched(b *testing.B, cmd *exec.Cmd, stdin bool) *benchProc {
	b.Helper()
	p := &benchProc{cmd: cmd, lines: make(chan string, 4)}
	var stdout io.ReadCloser
	p.stdin, stdout = startPiped(b, cmd, stdin)
	p.pid = cmd.Process.Pid
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	b.Cleanup(p.stop)
	return p
}

// expect waits (at most d) for the next line, which must start with prefix,
// and returns the rest of it.
func (p *benchProc) expect(prefix string, d time.Duration) (string, error) {
	select {
	case line, ok := <-p.lines:
		if !ok {
			return "", fmt.Errorf("pid %d exited before %q", p.pid, prefix)
		}
		rest, found := strings.CutPrefix(line, prefix)
		if !found {
			return "", fmt.Errorf("pid %d said %q, wanted %q", p.pid, line, prefix)
		}
		return strings.TrimSpace(rest), nil
	case <-time.After(d):
		return "", fmt.Errorf("pid %d: no %q within %v", p.pid, prefix, d)
	}
}

// ledAt waits for "led NS" and returns NS.
func (p *benchProc) ledAt(d time.Duration) (int64, error) {
	s, err := p.expect("led", d)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

// stop ends p (SIGKILL unless it has exited) and reaps it, in at most 10s.
func (p *benchProc) stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	if p.stdin != nil {
		p.stdin.Close()
	}
	p.cmd.Process.Kill()
	p.reap(10 * time.Second)
}

// reap waits at most d for p to exit; it reports whether it did.
func (p *benchProc) reap(d time.Duration) bool {
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// cpu is the user+system CPU time of a reaped p.
func (p *benchProc) cpu() time.Duration {
	ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// waitReady returns once p waits for the lock: its ticket is queued
// (leaderrun, nth ticket counting the holder's), it is blocked in flock(2)
// according to /proc/locks, or, for a polling tool, it has said "waiting"
// and made its first try.
func waitReady(p *benchProc, tool, dir, name string, nth int) error {
	if _, err := p.expect("waiting", 10*time.Second); err != nil {
		return err
	}
	var ready func() bool
	switch tool {
	case "leaderrun":
		ready = func() bool { return countTickets(dir, name) >= nth }
	case "flock2", "flock1":
		ready = func() bool { return blockedInFlock(p.pid) }
	default:
		time.Sleep(time.Millisecond)
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for !ready() {
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d (%s) not waiting within 10s", p.pid, tool)
		}
		time.Sleep(100 * time.Microsecond)
	}
	return nil
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
