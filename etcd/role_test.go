package etcd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

// runRole is the test binary re-executed as a contender on another
// "host": role "holder" acquires LR_NAME, prints "leader EPOCH", then
// "write EPOCH" every 20ms while its term lasts (what a leader does to a
// fenced resource), then "lost CAUSE". Stdin closing ends it.
func runRole(role string) int {
	if role != "holder" {
		return 2
	}
	ttl, _ := time.ParseDuration(os.Getenv("LR_TTL"))
	l, err := Open(Config{Endpoints: strings.Split(os.Getenv("LR_EP"), ","), Prefix: os.Getenv("LR_PREFIX"), TTL: ttl, Host: "role"})
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	go func() { io.Copy(io.Discard, os.Stdin); os.Exit(0) }()
	lead, err := l.Acquire(context.Background(), os.Getenv("LR_NAME"), elect.Request{})
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	fmt.Println("leader", lead.Epoch())
	tick := time.NewTicker(20 * time.Millisecond)
	for {
		select {
		case <-lead.Done():
			fmt.Println("lost", lead.Err())
			lead.Release()
			<-make(chan struct{})
		case <-tick.C:
			fmt.Println("write", lead.Epoch())
		}
	}
}

// proc is a contender process started by a test.
type proc struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan line
}

type line struct {
	at   time.Time
	text string
}

func spawnHolder(t *testing.T, endpoints []string, prefix, name string, ttl time.Duration) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), proctest.RoleEnv+"=holder", "LR_EP="+strings.Join(endpoints, ","), "LR_PREFIX="+prefix, "LR_NAME="+name, "LR_TTL="+ttl.String())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, stdin: stdin, lines: make(chan line, 4096)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- line{time.Now(), sc.Text()}
		}
		close(p.lines)
	}()
	t.Cleanup(p.kill)
	return p
}

// expect waits (at most d) for a line with prefix, skipping "write" lines.
func (p *proc) expect(prefix string, d time.Duration) string {
	p.t.Helper()
	timeout := time.After(d)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("pid %d exited; wanted %q", p.cmd.Process.Pid, prefix)
			}
			if strings.HasPrefix(l.text, prefix) {
				return l.text
			}
			if !strings.HasPrefix(l.text, "write") {
				p.t.Fatalf("pid %d said %q; wanted %q", p.cmd.Process.Pid, l.text, prefix)
			}
		case <-timeout:
			p.t.Fatalf("pid %d: no %q within %v", p.cmd.Process.Pid, prefix, d)
		}
	}
}

func (p *proc) signal(sig syscall.Signal) {
	if p.cmd.Process.Pid >= 2 {
		p.cmd.Process.Signal(sig)
	}
}

func (p *proc) kill() {
	if p.cmd.ProcessState != nil || p.cmd.Process.Pid < 2 {
		return
	}
	p.cmd.Process.Kill()
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.stdin.Close()
	p.cmd.Wait()
}
