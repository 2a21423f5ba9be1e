//go:build unix

package cmd

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// forwarded are the signals passed on to COMMAND's process group.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP,
	syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// terminating reports whether sig asks leaderrun to finish: after it,
// COMMAND is not restarted.
func terminating(sig os.Signal) bool { return sig != syscall.SIGUSR1 && sig != syscall.SIGUSR2 }

func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}

func startChild(argv, env []string, stdout io.Writer, prepare ...func(*exec.Cmd)) (*child, error) {
	cmd := newCmd(argv, env, stdout)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	for _, p := range prepare {
		p(cmd)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	if err := startAndWait(c); err != nil {
		return nil, startError(argv[0], err)
	}
	return c, nil
}

// signalGroup forwards sig to COMMAND's process group.
func (c *child) signalGroup(sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		_ = syscall.Kill(-c.pgid, s)
	}
}

// signal sends sig to COMMAND's process group and to every process that
// left it but is still a descendant of leaderrun.
func (c *child) signal(sig syscall.Signal) {
	_ = syscall.Kill(-c.pgid, sig)
	for _, pid := range descendants() {
		_ = syscall.Kill(pid, sig)
	}
}

// alive reports whether any process of COMMAND is left, after reaping the
// orphans that were handed to leaderrun as their subreaper.
func (c *child) alive() bool {
	if !c.exited() {
		return true
	}
	reapOrphans()
	if syscall.Kill(-c.pgid, 0) != syscall.ESRCH {
		return true
	}
	return len(descendants()) > 0
}

// stop ends every process of COMMAND: SIGTERM (and SIGCONT, so that a
// stopped process can act on it), then SIGKILL after grace. It returns once
// they are all gone, or after a bounded wait for processes that ignore even
// SIGKILL (uninterruptible sleep).
func (c *child) stop(grace time.Duration) {
	if !c.alive() {
		return
	}
	c.signal(syscall.SIGTERM)
	c.signal(syscall.SIGCONT)
	if waitGone(c, grace) {
		return
	}
	c.signal(syscall.SIGKILL)
	waitGone(c, 5*time.Second)
}

func waitGone(c *child, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	select {
	case <-c.done:
	case <-deadline.C:
		return false
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for c.alive() {
		select {
		case <-tick.C:
		case <-deadline.C:
			return false
		}
	}
	return true
}
