package bus

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
)

// runRole plays the part a re-executed test binary was given. Roles read
// commands from stdin, one a line, and report on stdout, one a line; they
// exit when stdin closes.
func runRole(role string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var err error
	switch role {
	case "leader":
		err = roleLeader(ctx)
	case "member":
		err = roleMember(ctx)
	case "rawdial":
		err = roleRawDial(ctx)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, role+":", err)
		return 1
	}
	return 0
}

type out struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (o *out) say(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.w, format+"\n", args...)
	o.w.Flush()
}

// roleLeader waits in line for the lock, serves the bus, says "leading
// EPOCH", and publishes on "publish N" (in bursts of 50, then "published").
func roleLeader(ctx context.Context) error {
	o := &out{w: bufio.NewWriter(os.Stdout)}
	l, err := elect.Open(elect.Config{Dir: os.Getenv("BUS_DIR")})
	if err != nil {
		return err
	}
	defer l.Close()
	lead, err := l.Acquire(ctx, testName, elect.Request{})
	if err != nil {
		return err
	}
	defer lead.Release()
	q, _ := strconv.Atoi(os.Getenv("BUS_QUEUE"))
	if q == 0 {
		q = defaultQueueLen
	}
	pid := os.Getpid()
	s, err := Listen(lead, QueueLength(q), WithHandler(func(ctx context.Context, r Request) ([]byte, error) {
		if string(r.Data) == "block" {
			o.say("blocking")
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return fmt.Appendf(nil, "pid:%d:%s", pid, r.Data), nil
	}))
	if err != nil {
		return err
	}
	go s.Serve(ctx)
	defer s.Close()
	o.say("leading %d", lead.Epoch())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "publish" {
			n, _ := strconv.Atoi(f[1])
			for i := range n {
				if _, err := s.Publish(fmt.Appendf(nil, "L%d-%d", pid, i)); err != nil {
					return err
				}
				if i%50 == 49 {
					time.Sleep(time.Millisecond)
				}
			}
			o.say("published")
		}
	}
	return nil
}

// roleMember dials (waiting for a leader) and reports leader changes as
// "leader EPOCH PID GAP" and "lost ERR". It keeps a digest of each term's
// messages rather than printing them, so that its output never holds it
// back. Commands: "publish N"; "request DATA" (answers "reply DATA" or
// "reqerr ERR"); "await N [EPOCH]" (answers "have EPOCH COUNT DIGEST"
// once the current term, or the one given, has N messages).
func roleMember(ctx context.Context) error {
	o := &out{w: bufio.NewWriter(os.Stdout)}
	// A deep buffer: on a loaded machine this role must not cut itself
	// off as a slow consumer (TestClientSideSlowConsumer covers that).
	c, err := Dial(ctx, os.Getenv("BUS_DIR"), testName, WaitForLeader(), EventBuffer(1<<16))
	if err != nil {
		return err
	}
	defer c.Close()
	var (
		mu      sync.Mutex
		changed = make(chan struct{})
		epoch   uint64
		count   int
		lastSeq uint64
		digest  = sha256.New()
	)
	go func() {
		for ev := range c.Events() {
			switch ev.Kind {
			case EventLeader:
				o.say("leader %d %d %v", ev.Leader.Epoch, ev.Leader.PID, ev.Gap)
			case EventMessage:
				m := ev.Message
				mu.Lock()
				if m.Epoch != epoch {
					epoch, count, lastSeq = m.Epoch, 0, 0
					digest.Reset()
				}
				if m.Seq <= lastSeq {
					o.say("bad sequence %d after %d", m.Seq, lastSeq)
				}
				lastSeq = m.Seq
				count++
				fmt.Fprintf(digest, "%d %d %s\n", m.Seq, m.PID, m.Data)
				close(changed)
				changed = make(chan struct{})
				mu.Unlock()
			case EventLost:
				o.say("lost %v", ev.Err)
			}
		}
	}()
	pid := os.Getpid()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "publish":
			n, _ := strconv.Atoi(f[1])
			for i := range n {
				if err := c.Publish(ctx, fmt.Appendf(nil, "M%d-%d", pid, i)); err != nil {
					return err
				}
			}
			o.say("published")
		case "request":
			go func() {
				r, err := c.Request(ctx, []byte(f[1]))
				if err != nil {
					o.say("reqerr %v", err)
					return
				}
				o.say("reply %s", r)
			}()
		case "await":
			n, _ := strconv.Atoi(f[1])
			var want uint64
			if len(f) > 2 {
				want, _ = strconv.ParseUint(f[2], 10, 64)
			}
			go func() {
				for {
					mu.Lock()
					e, k, ch := epoch, count, changed
					var sum []byte
					if k >= n && (want == 0 || e == want) {
						sum = digest.Sum(nil)
					}
					mu.Unlock()
					if sum != nil {
						o.say("have %d %d %x", e, k, sum[:8])
						return
					}
					select {
					case <-ch:
					case <-ctx.Done():
						return
					}
				}
			}()
		}
	}
	return nil
}

// roleRawDial connects to the socket in BUS_SOCK without any check of its
// own and reports what the leader said: "refused TEXT" or "hello".
func roleRawDial(ctx context.Context) error {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", os.Getenv("BUS_SOCK"))
	if err != nil {
		return err
	}
	uc := nc.(*net.UnixConn)
	defer uc.Close()
	uc.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = handshake(uc, newFrameReader(uc, 1<<20), clientHello{version: protoVersion, pid: uint32(os.Getpid())})
	switch {
	case errors.Is(err, ErrRefused):
		fmt.Printf("refused %v\n", err)
	case err != nil:
		return err
	default:
		fmt.Println("hello")
	}
	return nil
}

// proc is a re-executed test binary playing a role.
type proc struct {
	t     *testing.T
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu      sync.Mutex
	lines   []string
	changed chan struct{}
	exited  bool
}

func startRole(t *testing.T, name, role string, env []string, cred *syscall.Credential) *proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return startExe(t, exe, name, role, env, cred)
}

func startExe(t *testing.T, exe, name, role string, env []string, cred *syscall.Credential) *proc {
	t.Helper()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), roleEnv+"="+role), env...)
	cmd.Stderr = &prefixWriter{t: t, name: name}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, name: name, cmd: cmd, stdin: stdin, changed: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.add(sc.Text(), false)
		}
		p.add("", true)
	}()
	t.Cleanup(func() {
		// Only this process, which the test started, is signalled.
		stdin.Close()
		p.cmd.Process.Signal(syscall.SIGCONT)
		timer := time.AfterFunc(5*time.Second, func() { p.cmd.Process.Kill() })
		<-done
		p.cmd.Wait()
		timer.Stop()
	})
	return p
}

func (p *proc) add(line string, eof bool) {
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

func (p *proc) send(line string) {
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("%s: %v", p.name, err)
	}
}

// wait returns once ok holds for the lines so far, failing the test at
// ctx's end or if the process ends first.
func (p *proc) wait(ctx context.Context, what string, ok func(lines []string) bool) []string {
	p.t.Helper()
	for {
		p.mu.Lock()
		lines, changed, exited := p.lines, p.changed, p.exited
		p.mu.Unlock()
		if ok(lines) {
			return lines
		}
		if exited {
			p.t.Fatalf("%s exited before %s; its output:\n%s", p.name, what, tail(lines))
		}
		select {
		case <-changed:
		case <-ctx.Done():
			p.t.Fatalf("%s: no %s before the deadline; its output:\n%s", p.name, what, tail(lines))
		}
	}
}

// waitPrefix waits for a line starting with prefix after the first from
// lines, and returns it and its index.
func (p *proc) waitPrefix(ctx context.Context, from int, prefix string) (string, int) {
	p.t.Helper()
	var line string
	var at int
	p.wait(ctx, fmt.Sprintf("%q", prefix), func(lines []string) bool {
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

func (p *proc) count(prefix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

func tail(lines []string) string {
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

type prefixWriter struct {
	t    *testing.T
	name string
}

func (w *prefixWriter) Write(b []byte) (int, error) {
	w.t.Logf("%s stderr: %s", w.name, strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
