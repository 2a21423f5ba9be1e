//go:build unix

package proctest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RoleEnv names the role a re-executed test binary plays.
const RoleEnv = "LEADERRUN_TEST_ROLE"

// Wait bounds every wait of a Proc that takes no context of its own.
const Wait = 10 * time.Second

// Main runs the role that RoleEnv names, if any, and exits with its code;
// an unknown role exits 2. Without RoleEnv it returns, and TestMain goes
// on to run the tests.
func Main(roles map[string]func() int) {
	role := os.Getenv(RoleEnv)
	if role == "" {
		return
	}
	run, ok := roles[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "proctest: unknown role %q\n", role)
		os.Exit(2)
	}
	os.Exit(run())
}

// Command returns a command that re-executes the test binary in role,
// with env added to its environment; it runs no test or benchmark.
func Command(role string, env ...string) *exec.Cmd {
	return command(os.Args[0], role, append(os.Environ(), env...))
}

// CommandAt returns a command that runs bin, a test binary (such as a
// copy made by [CopyBinary] that another user can run), in role with
// exactly env and RoleEnv as its environment, in the directory "/".
func CommandAt(bin, role string, env []string) *exec.Cmd {
	cmd := command(bin, role, env)
	cmd.Dir = "/"
	return cmd
}

func command(bin, role string, env []string) *exec.Cmd {
	cmd := exec.Command(bin, "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(append([]string{}, env...), RoleEnv+"="+role)
	return cmd
}

// Proc is a process started by a test, with its stdout read into lines.
type Proc struct {
	tb    testing.TB
	Name  string
	Cmd   *exec.Cmd
	stdin io.WriteCloser
	group bool // leads a process group of its own (Options.Setpgid)

	mu      sync.Mutex
	lines   []string
	next    int // the first line Expect has not consumed
	changed chan struct{}
	exited  bool
	done    chan struct{} // closed once the process is reaped
}

// Options adjust Start.
type Options struct {
	// Grace is how long the cleanup waits, after closing stdin, for the
	// process to exit by itself before it is killed (default 0: killed
	// at once).
	Grace time.Duration
	// Stderr receives the process's stderr (default: the test's log,
	// each line prefixed with the process's name).
	Stderr io.Writer
	// Cred runs the process as another user.
	Cred *syscall.Credential
	// Setpgid puts the process in a process group of its own.
	Setpgid bool
	// OnLine, if set, is called with each line of stdout as it is read
	// (from one goroutine, in order), before the line is kept for
	// Expect and Lines; once the process is reaped every call has
	// returned.
	OnLine func(line string)
}

// Start starts cmd (its stdin and stdout must be unset) and registers the
// cleanup that ends it.
func Start(tb testing.TB, name string, cmd *exec.Cmd, opt Options) *Proc {
	tb.Helper()
	p := &Proc{tb: tb, Name: name, Cmd: cmd, group: opt.Setpgid, changed: make(chan struct{}), done: make(chan struct{})}
	configure(cmd, opt)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	// Pipes of our own rather than exec's, so that the process is reaped
	// as soon as it exits even if a grandchild keeps them open.
	var ends []*os.File
	pipe := func() *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			tb.Fatal(err)
		}
		ends = append(ends, w)
		return r
	}
	stdout := pipe()
	cmd.Stdout = ends[0]
	var stderr *os.File
	if cmd.Stderr == nil {
		stderr = pipe()
		cmd.Stderr = ends[1]
	}
	err = cmd.Start()
	for _, w := range ends {
		w.Close()
	}
	if err != nil {
		stdout.Close()
		if stderr != nil {
			stderr.Close()
		}
		tb.Fatalf("%s: %v", name, err)
	}
	p.stdin = stdin
	go p.collect(stdout, stderr, opt.OnLine)
	tb.Cleanup(func() { p.end(opt.Grace) })
	return p
}

// configure applies opt to cmd.
func configure(cmd *exec.Cmd, opt Options) {
	if opt.Stderr != nil {
		cmd.Stderr = opt.Stderr
	}
	if opt.Cred != nil || opt.Setpgid {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Credential = opt.Cred
		cmd.SysProcAttr.Setpgid = opt.Setpgid
	}
	if cmd.WaitDelay == 0 {
		// A grandchild that keeps an output open must not keep the
		// process from being reaped, nor its Proc from ending.
		cmd.WaitDelay = time.Second
	}
}

// collect reads stdout into lines and stderr (if not nil) into the test's
// log, reaps the process as soon as it exits, and then gives a grandchild
// that keeps either open WaitDelay before it stops reading.
func (p *Proc) collect(stdout, stderr *os.File, onLine func(string)) {
	var readers sync.WaitGroup
	readers.Go(func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if onLine != nil {
				onLine(sc.Text())
			}
			p.add(sc.Text(), false)
		}
	})
	if stderr != nil {
		readers.Go(func() {
			sc := bufio.NewScanner(stderr)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				p.tb.Logf("%s stderr: %s", p.Name, sc.Text())
			}
		})
	}
	read := make(chan struct{})
	go func() { readers.Wait(); close(read) }()
	p.Cmd.Wait()
	select {
	case <-read:
	case <-time.After(p.Cmd.WaitDelay):
		stdout.Close()
		if stderr != nil {
			stderr.Close()
		}
		<-read
	}
	stdout.Close()
	if stderr != nil {
		stderr.Close()
	}
	p.add("", true)
	close(p.done)
}

// StartRole starts the test binary in role (see Command).
func StartRole(tb testing.TB, name, role string, env ...string) *Proc {
	tb.Helper()
	return Start(tb, name, Command(role, env...), Options{})
}

// Run starts cmd as Start does, with stdin closed at once, waits (at most
// Wait) for it to exit by itself, and returns every line of its stdout and
// its exit code.
func Run(tb testing.TB, name string, cmd *exec.Cmd, opt Options) (lines []string, code int) {
	tb.Helper()
	p := Start(tb, name, cmd, opt)
	p.CloseStdin()
	code = p.Wait()
	return p.Lines(), code
}

// PID is the process's pid.
func (p *Proc) PID() int { return p.Cmd.Process.Pid }

func (p *Proc) add(line string, eof bool) {
	p.mu.Lock()
	if eof {
		p.exited = true
	} else {
		p.lines = append(p.lines, line)
	}
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// Send writes line to the process's stdin. The error (a process that
// has exited does not read it) is for the tests that want to know.
func (p *Proc) Send(line string) error {
	_, err := io.WriteString(p.stdin, line+"\n")
	return err
}

// CloseStdin closes the process's stdin (roles take that as "exit").
func (p *Proc) CloseStdin() { p.stdin.Close() }

// Lines returns every line the process has written so far.
func (p *Proc) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// Count returns how many lines so far start with prefix.
func (p *Proc) Count(prefix string) int {
	n := 0
	for _, l := range p.Lines() {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// Next returns the next line Expect has not consumed, waiting at most d;
// ok is false if none came (the process may have exited).
func (p *Proc) Next(d time.Duration) (line string, ok bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		p.mu.Lock()
		if p.next < len(p.lines) {
			line = p.lines[p.next]
			p.next++
			p.mu.Unlock()
			return line, true
		}
		changed, exited := p.changed, p.exited
		p.mu.Unlock()
		if exited {
			return "", false
		}
		select {
		case <-changed:
		case <-timer.C:
			return "", false
		}
	}
}

// Expect waits (at most Wait) for the next line and checks that it starts
// with prefix. On a timeout the process is sent SIGQUIT first, so that its
// goroutine dump on stderr shows where it waits.
func (p *Proc) Expect(prefix string) string {
	p.tb.Helper()
	line, ok := p.Next(Wait)
	if !ok {
		if p.hasExited() {
			p.tb.Fatalf("%s (pid %d) exited; wanted %q", p.Name, p.PID(), prefix)
		}
		p.Signal(syscall.SIGQUIT)
		time.Sleep(200 * time.Millisecond)
		p.tb.Fatalf("%s (pid %d): no %q within %v (goroutine dump above)", p.Name, p.PID(), prefix, Wait)
	}
	if !strings.HasPrefix(line, prefix) {
		p.tb.Fatalf("%s (pid %d) said %q; wanted %q", p.Name, p.PID(), line, prefix)
	}
	return line
}

// Quiet checks that the process says nothing for d: used to confirm that
// a waiter keeps waiting, never to measure speed.
func (p *Proc) Quiet(d time.Duration) {
	p.tb.Helper()
	if line, ok := p.Next(d); ok {
		p.tb.Fatalf("%s (pid %d) said %q; wanted it to keep waiting", p.Name, p.PID(), line)
	}
}

// WaitFor returns once ok holds for the lines so far, failing the test at
// ctx's end or if the process exits first.
func (p *Proc) WaitFor(ctx context.Context, what string, ok func(lines []string) bool) []string {
	p.tb.Helper()
	for {
		p.mu.Lock()
		lines, changed, exited := p.lines, p.changed, p.exited
		p.mu.Unlock()
		if ok(lines) {
			return lines
		}
		if exited {
			p.tb.Fatalf("%s exited before %s; its output:\n%s", p.Name, what, Tail(lines))
		}
		select {
		case <-changed:
		case <-ctx.Done():
			p.tb.Fatalf("%s: no %s before the deadline; its output:\n%s", p.Name, what, Tail(lines))
		}
	}
}

// WaitPrefix waits for a line starting with prefix after the first from
// lines, and returns it and its index.
func (p *Proc) WaitPrefix(ctx context.Context, from int, prefix string) (string, int) {
	p.tb.Helper()
	var line string
	var at int
	p.WaitFor(ctx, fmt.Sprintf("%q", prefix), func(lines []string) bool {
		for i := from; i < len(lines); i++ {
			if strings.HasPrefix(lines[i], prefix) {
				line, at = lines[i], i
				return true
			}
		}
		return false
	})
	return line, at
}

func (p *Proc) hasExited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// Signal sends sig to the process; once it has been reaped it sends
// nothing and returns os.ErrProcessDone.
func (p *Proc) Signal(sig syscall.Signal) error {
	if p.PID() < 2 {
		return fmt.Errorf("proctest: refusing to signal pid %d", p.PID())
	}
	if p.hasExited() {
		return os.ErrProcessDone
	}
	return p.Cmd.Process.Signal(sig)
}

// SignalGroup sends sig to the process group that the process leads
// (started with Options.Setpgid), while the process is not reaped, so
// that its pid is still its group's id.
func (p *Proc) SignalGroup(sig syscall.Signal) error {
	if !p.group || p.PID() < 2 {
		return fmt.Errorf("proctest: %s (pid %d) leads no process group of its own", p.Name, p.PID())
	}
	if p.hasExited() {
		return os.ErrProcessDone
	}
	return syscall.Kill(-p.PID(), sig)
}

// Kill ends the process (SIGKILL, then SIGCONT in case it was stopped),
// and its process group if it leads one, and reaps it, failing the test
// if it cannot be reaped within Wait.
func (p *Proc) Kill() {
	p.tb.Helper()
	if p.group {
		p.SignalGroup(syscall.SIGKILL)
	}
	p.Signal(syscall.SIGKILL)
	p.Signal(syscall.SIGCONT)
	p.stdin.Close()
	p.reap()
}

// Wait waits (at most Wait) for the process to exit by itself and returns
// its exit code.
func (p *Proc) Wait() int {
	p.tb.Helper()
	select {
	case <-p.done:
	case <-time.After(Wait):
		p.tb.Fatalf("%s (pid %d) did not exit within %v", p.Name, p.PID(), Wait)
	}
	return p.Cmd.ProcessState.ExitCode()
}

// Exited is closed once the process has exited and been reaped.
func (p *Proc) Exited() <-chan struct{} { return p.done }

func (p *Proc) reap() {
	p.tb.Helper()
	select {
	case <-p.done:
	case <-time.After(Wait):
		p.tb.Errorf("%s (pid %d) outlived its test: not reaped %v after SIGKILL", p.Name, p.PID(), Wait)
	}
}

// end is the cleanup: stdin closed, the process continued, given grace to
// exit by itself, then killed and reaped.
func (p *Proc) end(grace time.Duration) {
	p.stdin.Close()
	p.Signal(syscall.SIGCONT)
	if grace > 0 {
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
	}
	p.Kill()
}

// Eventually checks cond (test-side only, every 2ms) until it holds,
// failing the test if it does not within Wait.
func Eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(Wait)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("not within %v: %s", Wait, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Tail returns the last 20 of lines, one a line.
func Tail(lines []string) string {
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}
