package instance_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/instance"
)

// roleEnv names the part a re-executed test binary plays.
const roleEnv = "LEADERRUN_INSTANCE_TEST_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role == "leak" {
		os.Exit(leakApp())
	} else if role != "" {
		os.Exit(runApp(role))
	}
	os.Exit(m.Run())
}

// echo is what the test primary answers to "echo": the invocation as it
// arrived.
type echo struct {
	ID    string   `json:"id"`
	Args  [][]byte `json:"args"`
	Cwd   string   `json:"cwd"`
	Env   [][]byte `json:"env"`
	PID   int      `json:"pid"`
	UID   int      `json:"uid"`
	Local bool     `json:"local"`
}

// runApp is a single-instance program. As the primary it says "primary
// PID" and then "inv ID" for each invocation it takes, and answers by the
// first argument: "echo" (default) writes the invocation as JSON; "exit N"
// is done with N; "big N" writes N bytes; "hold" takes it and never
// finishes. INST_NOREAD=1 makes a primary that never takes invocations;
// INST_MAX=N one that returns after N forwarded ones. A launch that
// forwards prints what the primary wrote and exits with its status.
// With INST_BARRIER=1 it waits for fd 3 to close before starting.
// INST_OSARGS=1 forwards its own os.Args[1:]. INST_QUIT=1 cancels the ctx given to Run once a forwarded one is answered.
func runApp(role string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if os.Getenv("INST_BARRIER") == "1" {
		io.Copy(io.Discard, os.NewFile(3, "barrier"))
	}
	ack, _ := time.ParseDuration(os.Getenv("INST_ACK"))
	max, _ := strconv.Atoi(os.Getenv("INST_MAX"))
	var args [][]byte
	for _, a := range strings.Fields(os.Getenv("INST_ARGS")) {
		args = append(args, []byte(a))
	}
	if args == nil && os.Getenv("INST_OSARGS") != "1" {
		args = [][]byte{[]byte("echo")}
	} // else os.Args[1:], Options.Args's default
	var mu sync.Mutex
	say := func(format string, a ...any) {
		mu.Lock()
		fmt.Fprintf(os.Stdout, format+"\n", a...)
		mu.Unlock()
	}
	// INST_QUIT=1: the primary's ctx is cancelled right after it answers
	// its first forwarded invocation, as an `app --quit` or a SIGTERM
	// caught by signal.NotifyContext would.
	runCtx, quit := context.WithCancel(ctx)
	defer quit()
	res, err := instance.Run(runCtx, os.Getenv("INST_NAME"), instance.Options{
		Dir: os.Getenv("INST_DIR"), GroupShared: os.Getenv("INST_GROUP") == "1", Args: args, AckTimeout: ack, Replace: os.Getenv("INST_REPLACE") == "1",
	}, func(ctx context.Context, p *instance.Primary) error {
		say("primary %d", os.Getpid())
		if os.Getenv("INST_NOREAD") == "1" {
			// Says "member" once a launch has connected (a test's poll,
			// not the library's), then never takes anything.
			for p.Server().Members() == 0 && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			say("member")
			<-ctx.Done()
			return nil
		}
		n := 0
		for {
			select {
			case <-ctx.Done():
				return nil
			case inv := <-p.Invocations():
				say("inv %s", inv.ID)
				if !inv.Local {
					n++
				}
				answer(inv)
				if !inv.Local && os.Getenv("INST_QUIT") == "1" {
					quit()
				}
				if max > 0 && n >= max {
					return nil
				}
			}
		}
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", role, err)
		if errors.Is(err, instance.ErrNotResponding) {
			return 98
		}
		return 99
	}
	if res.Primary {
		say("primary-done")
	}
	return res.Exit
}

func answer(inv *instance.Invocation) {
	a := inv.Strings()
	switch {
	case len(a) == 2 && a[0] == "exit":
		n, _ := strconv.Atoi(a[1])
		inv.Done(n)
	case len(a) == 2 && a[0] == "big":
		n, _ := strconv.Atoi(a[1])
		line := strings.Repeat("x", 99) + "\n"
		for ; n >= 100; n -= 100 {
			io.WriteString(inv.Stdout, line)
		}
		io.WriteString(inv.Stderr, "big done\n")
		inv.Done(0)
	case len(a) == 1 && a[0] == "cat":
		go func() {
			n, err := io.Copy(inv.Stdout, inv.Stdin)
			fmt.Fprintf(inv.Stderr, "%d %v\n", n, err)
			inv.Done(0)
		}()
	case len(a) == 1 && a[0] == "hold":
	default:
		var env [][]byte
		for _, e := range inv.Env {
			env = append(env, []byte(e))
		}
		b, _ := json.Marshal(echo{ID: inv.ID, Args: inv.Args, Cwd: inv.Cwd, Env: env, PID: inv.PID, UID: inv.UID, Local: inv.Local})
		inv.Stdout.Write(append(b, '\n'))
		inv.Done(0)
	}
}

// proc is a helper process the test started; it is killed and reaped at
// the end of the test.
type proc struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
}

func startApp(t *testing.T, dir, name string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"=app", "INST_DIR="+dir, "INST_NAME="+name)
	cmd.Env = append(cmd.Env, env...)
	cmd.Dir = t.TempDir()
	cmd.Stderr = os.Stderr
	// A group of its own: stopped in the test binary's group, it would be
	// continued (SIGHUP, SIGCONT) by the kernel whenever another member's
	// exit leaves that group orphaned, as it is under nohup or setsid.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, lines: make(chan string, 1000), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.kill(t) })
	return p
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	pid := p.pid()
	if pid < 2 {
		t.Fatalf("refusing to signal pid %d", pid)
	}
	syscall.Kill(pid, sig)
}

func (p *proc) kill(t *testing.T) {
	select {
	case <-p.done:
		return
	default:
	}
	p.signal(t, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Errorf("helper pid %d did not end after SIGKILL", p.pid())
	}
}

// expect waits for a line with the prefix.
func (p *proc) expect(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("helper ended before saying %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-p.done:
			select {
			case l := <-p.lines:
				if strings.HasPrefix(l, prefix) {
					return l
				}
				continue
			default:
			}
			t.Fatalf("helper ended before saying %q", prefix)
		case <-timeout:
			t.Fatalf("helper did not say %q within 30s", prefix)
		}
	}
}

// forward runs the test process as a later launch; it must never become
// the primary.
func forward(t *testing.T, ctx context.Context, dir, name string, o instance.Options) (instance.Result, string, error) {
	t.Helper()
	var out strings.Builder
	var mu sync.Mutex
	o.Dir = dir
	o.Stdout = writerFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(b) })
	o.Stderr = o.Stdout
	res, err := instance.Run(ctx, name, o, func(ctx context.Context, p *instance.Primary) error {
		t.Errorf("the forwarding launch became the primary")
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	return res, out.String(), err
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
