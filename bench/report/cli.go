//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/oslock"
)

// buildCLI builds the leaderrun binary once, if the CLI is committed.
func buildCLI(ctx context.Context, root, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", "-C", root, "ls-files", "main.go", "cmd").Output()
	if err == nil && len(strings.TrimSpace(string(out))) == 0 {
		return "", fmt.Errorf("the CLI (main.go, cmd/) is not committed yet")
	}
	return goBuild(ctx, root, ".", filepath.Join(dir, "leaderrun"))
}

// goBuild builds the command pkg of the module at root into bin, as `go
// build` does by default.
func goBuild(ctx context.Context, root, pkg, bin string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v: %s", pkg, err, firstLine(out))
	}
	return bin, nil
}

// startup times fork+exec+wait of each command, round-robin so that noise
// falls on all of them alike.
func startup(ctx context.Context, cmds map[string][]string, order []string, n int) (map[string][]float64, error) {
	out := map[string][]float64{}
	for i := 0; i < n+5; i++ {
		for _, tool := range order {
			argv := cmds[tool]
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			t0 := time.Now()
			if err := cmd.Run(); err != nil {
				return nil, fmt.Errorf("%s: %v", strings.Join(argv, " "), err)
			}
			if i >= 5 { // the first runs warm the page cache
				out[tool] = append(out[tool], float64(time.Since(t0)))
			}
		}
	}
	return out, nil
}

// watched is a process whose stdout lines are read as they come.
type watched struct {
	cmd   *exec.Cmd
	lines chan string
}

func startWatched(argv []string, env []string) (*watched, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w := &watched{cmd: cmd, lines: make(chan string, 4)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
		io.Copy(io.Discard, stdout)
	}()
	return w, nil
}

func (w *watched) expect(want string, d time.Duration) error {
	select {
	case l, ok := <-w.lines:
		if !ok {
			return fmt.Errorf("pid %d exited before saying %q", w.cmd.Process.Pid, want)
		}
		if l != want {
			return fmt.Errorf("pid %d said %q, wanted %q", w.cmd.Process.Pid, l, want)
		}
		return nil
	case <-time.After(d):
		return fmt.Errorf("pid %d: no %q within %v", w.cmd.Process.Pid, want, d)
	}
}

// end kills w's process group and reaps it, in at most 10s.
func (w *watched) end() {
	syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	done := make(chan struct{})
	go func() { w.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

// cliFailover measures, n times: the running instance is SIGKILLed, and
// the queued next instance's command prints "started". leaderrun is
// killed alone (its child must not outlive it); flock(1) is killed with
// its process group, since its command inherits the lock.
func cliFailover(ctx context.Context, tool, bin, dir string, n int) ([]float64, error) {
	name := "clifailover"
	file := filepath.Join(dir, "flock1.lock")
	script := []string{"sh", "-c", "echo started; exec sleep 1000"}
	argv := append([]string{"flock", file}, script...)
	var l *elect.Locker
	if tool != "flock1" { // leaderrun, or the -base build
		argv = append([]string{bin, "--dir", dir, "--name", name, "--"}, script...)
		var err error
		if l, err = elect.Open(elect.Config{Dir: dir}); err != nil {
			return nil, err
		}
		defer l.Close()
	}
	var all []*watched
	defer func() {
		for _, w := range all {
			w.end()
		}
		killTagged(dir)
	}()
	start := func() (*watched, error) {
		w, err := startWatched(argv, []string{"BENCH_TAG=" + dir})
		if err == nil {
			all = append(all, w)
		}
		return w, err
	}
	leader, err := start()
	if err != nil {
		return nil, err
	}
	if err := leader.expect("started", 10*time.Second); err != nil {
		return nil, err
	}
	var lat []float64
	for range n {
		if ctx.Err() != nil {
			return lat, ctx.Err()
		}
		next, err := start()
		if err != nil {
			return lat, err
		}
		ready := func() bool { return blockedInFlock(next.cmd.Process.Pid) }
		if l != nil {
			ready = func() bool {
				s, err := l.Query(ctx, name)
				return err == nil && slices.ContainsFunc(s.Pending, func(p elect.Pending) bool { return p.PID == next.cmd.Process.Pid })
			}
		}
		if err := until(ready, 10*time.Second); err != nil {
			return lat, fmt.Errorf("%s pid %d not queued: %v", tool, next.cmd.Process.Pid, err)
		}
		time.Sleep(time.Millisecond + rand.N(10*time.Millisecond))
		t0 := time.Now()
		if tool != "flock1" {
			leader.cmd.Process.Kill()
		} else {
			syscall.Kill(-leader.cmd.Process.Pid, syscall.SIGKILL)
		}
		if err := next.expect("started", 10*time.Second); err != nil {
			return lat, err
		}
		lat = append(lat, float64(time.Since(t0)))
		leader.end()
		leader = next
	}
	return lat, nil
}

func until(cond func() bool, d time.Duration) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", d)
		}
		time.Sleep(200 * time.Microsecond)
	}
	return nil
}

// blockedInFlock reports whether the kernel lists pid as waiting in
// flock(2).
func blockedInFlock(pid int) bool {
	w, _ := oslock.FlockWaiters()
	return w[pid]
}

// killTagged kills what is left of the processes this run started (a
// command whose leaderrun was SIGKILLed may linger a moment): they carry
// BENCH_TAG=dir in their environment.
func killTagged(dir string) {
	tag := []byte("BENCH_TAG=" + dir + "\x00")
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && strings.Contains(string(env), string(tag)) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
