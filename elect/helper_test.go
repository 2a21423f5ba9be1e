package elect

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/oslock"
)

// The test binary doubles as a contender process: TestMain runs the role
// named in LEADERRUN_TEST_ROLE instead of the tests.
func TestMain(m *testing.M) {
	switch os.Getenv("LEADERRUN_TEST_ROLE") {
	case "contender":
		os.Exit(contender())
	case "chaos", "hostile", "defaultdir", "groupshared":
		os.Exit(reliabilityRole(os.Getenv("LEADERRUN_TEST_ROLE")))
	case "bench":
		os.Exit(benchRole())
	}
	os.Exit(m.Run())
}

// contender asks for a lock as its environment says, prints "leader
// EPOCH" when granted, and then obeys stdin: "release" releases and exits.
// On losing leadership it prints "lost CAUSE" and, unless told to hold on,
// releases. Stdin closing (the test died) ends it.
func contender() int {
	env := os.Getenv
	l, err := Open(Config{Dir: env("T_DIR")})
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	req := Request{IfAvailable: env("T_TRY") != "", Steal: env("T_STEAL") != ""}
	if env("T_MODE") == "shared" {
		req.Mode = Shared
	}
	if d, err := time.ParseDuration(env("T_KILLAFTER")); err == nil {
		req.KillAfter = d
	}
	if d, err := time.ParseDuration(env("T_STEALSTOPPED")); err == nil {
		req.StealStopped = d
	}
	ctx := context.Background()
	if d, err := time.ParseDuration(env("T_TIMEOUT")); err == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	lead, err := l.Acquire(ctx, env("T_NAME"), req)
	switch {
	case errors.Is(err, ErrBusy):
		fmt.Println("busy")
		return 3
	case errors.Is(err, ErrStealAbandoned):
		fmt.Println("abandoned", err)
		return 5
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Println("timeout")
		return 4
	case err != nil:
		fmt.Println("error", err)
		return 2
	}
	fmt.Println("leader", lead.Epoch())
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	for {
		select {
		case <-lead.Done():
			fmt.Println("lost", lead.Err())
			if env("T_HOLD") == "" {
				lead.Release()
				fmt.Println("released")
				return 0
			}
			<-make(chan struct{}) // keep the kernel lock until killed
		case line, ok := <-lines:
			if !ok || line == "release" {
				lead.Release()
				fmt.Println("released")
				return 0
			}
		}
	}
}

// roleCommand re-executes the test binary in role (see TestMain), with env
// added to the environment; it runs no test or benchmark of its own.
func roleCommand(role string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(append(os.Environ(), "LEADERRUN_TEST_ROLE="+role), env...)
	return cmd
}

// startPiped starts cmd with its stderr shared, and returns pipes to its
// stdout and, if withStdin, its stdin.
func startPiped(tb testing.TB, cmd *exec.Cmd, withStdin bool) (stdin io.WriteCloser, stdout io.ReadCloser) {
	tb.Helper()
	var err error
	if withStdin {
		if stdin, err = cmd.StdinPipe(); err != nil {
			tb.Fatal(err)
		}
	}
	if stdout, err = cmd.StdoutPipe(); err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	return stdin, stdout
}

// proc is a contender started by a test.
type proc struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	pid   int
}

// spawn starts a contender for name in dir; extra are T_* settings.
func spawn(t *testing.T, dir, name string, extra ...string) *proc {
	t.Helper()
	cmd := roleCommand("contender", append([]string{"T_DIR=" + dir, "T_NAME=" + name}, extra...)...)
	stdin, stdout := startPiped(t, cmd, true)
	p := &proc{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 16), pid: cmd.Process.Pid}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(p.kill)
	return p
}

// expect waits (at most 10s) for the next line and checks its prefix.
func (p *proc) expect(prefix string) string {
	p.t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("pid %d exited; wanted %q", p.pid, prefix)
		}
		if !strings.HasPrefix(line, prefix) {
			p.t.Fatalf("pid %d said %q; wanted %q", p.pid, line, prefix)
		}
		return line
	case <-time.After(10 * time.Second):
		// Its goroutines on stderr say where it waits.
		p.signal(syscall.SIGQUIT)
		time.Sleep(200 * time.Millisecond)
		p.t.Fatalf("pid %d: no %q within 10s (goroutine dump above)", p.pid, prefix)
	}
	return ""
}

// quiet checks that p says nothing for d: used to confirm a waiter stays
// waiting, never to measure speed.
func (p *proc) quiet(d time.Duration) {
	p.t.Helper()
	select {
	case line := <-p.lines:
		p.t.Fatalf("pid %d said %q; wanted it to keep waiting", p.pid, line)
	case <-time.After(d):
	}
}

func (p *proc) say(s string) { io.WriteString(p.stdin, s+"\n") }

func (p *proc) signal(sig syscall.Signal) { p.cmd.Process.Signal(sig) }

// kill ends the process (SIGKILL, then SIGCONT in case it was stopped) and
// reaps it.
func (p *proc) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Kill()
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.stdin.Close()
	p.cmd.Wait()
}

// wait reaps p (at most 10s) and returns its exit code.
func (p *proc) wait() int {
	p.t.Helper()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.t.Fatalf("pid %d did not exit within 10s", p.pid)
	}
	return p.cmd.ProcessState.ExitCode()
}

// eventually polls cond (test-side only) until it holds or 10s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// testLocker opens a Locker on a fresh private directory.
func testLocker(t *testing.T) (*Locker, string) {
	t.Helper()
	dir := t.TempDir()
	l, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, dir
}

// pending returns the queued pids of name in order.
func pending(t *testing.T, l *Locker, name string) []int {
	t.Helper()
	s, err := l.Query(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range s.Pending {
		pids = append(pids, p.PID)
	}
	return pids
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var defaultSubOpts = oslock.DirOptions{}
