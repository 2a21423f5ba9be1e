//go:build unix

package supervise

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

func forwarded() []os.Signal {
	return []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP,
		syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}
}

func terminating(sig os.Signal) bool { return sig != syscall.SIGUSR1 && sig != syscall.SIGUSR2 }

func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}

func startChild(argv, env []string, stdout io.Writer, prepare ...func(*exec.Cmd)) (*Command, error) {
	tty, ok := foregroundTTY()
	if !ok {
		tty = -1
	}
	c, err := startIn(argv, env, stdout, tty, prepare)
	if err != nil && c.tty {
		// The terminal could not be handed over (it changed under us):
		// run COMMAND as a job without it, as before.
		c, err = startIn(argv, env, stdout, -1, prepare)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// startIn starts COMMAND; tty >= 0 is the terminal (leaderrun's
// descriptor of it) whose foreground COMMAND's group gets.
func startIn(argv, env []string, stdout io.Writer, tty int, prepare []func(*exec.Cmd)) (*Command, error) {
	cmd := newCmd(argv, env, stdout)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c := &Command{cmd: cmd, done: make(chan struct{}), stopped: make(chan struct{}, 1), tty: tty >= 0}
	if tty >= 0 {
		// With Foreground, Ctty is a descriptor of this process (the
		// ioctl happens in the child before its descriptors are
		// rearranged), not one of the child's.
		cmd.SysProcAttr.Foreground, cmd.SysProcAttr.Ctty = true, tty
	}
	for _, p := range prepare {
		p(cmd)
	}
	return c, startAndWait(c)
}

// signalGroup forwards sig to COMMAND's process group.
func (c *Command) signalGroup(sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		_ = syscall.Kill(-c.pgid, s)
	}
}

// signal sends sig to COMMAND's process group and to every other
// process of COMMAND's (members).
func (c *Command) signal(sig syscall.Signal) {
	_ = syscall.Kill(-c.pgid, sig)
	for _, pid := range c.members() {
		_ = syscall.Kill(pid, sig)
	}
}

// members lists the processes of COMMAND's besides its process group:
// where COMMAND was started in the term's cgroup, every process in it
// (cgroup.procs), for all of COMMAND's tree is there but what moved itself
// to another cgroup, which is not COMMAND's then, as for the fence (see
// the package doc); elsewhere leaderrun's living descendants (its orphans
// are handed to it as their subreaper) but the watchdog.
func (c *Command) members() []int {
	if pids, ok := cgroupProcs(c.cgroup); ok {
		return pids
	}
	return descendants(c.forkTid)
}

// alive reports whether any process of COMMAND is left, after reaping the
// orphans that were handed to leaderrun as their subreaper. In a cgroup
// it asks the cgroup (cgroup.events: one read), not /proc: the scan of
// /proc/PID/task/TID/children of leaderrun's threads cost 0.2 ms at the end
// of every term, and the entries it made in /proc cost the parent's reap
// of leaderrun ten times as much again (those entries are flushed as the
// threads exit, and the reap waits for that: 1.5 ms a reap against 34 µs
// in a chain's profile).
func (c *Command) alive() bool {
	if !c.Exited() {
		return true
	}
	childless := reapOrphans()
	if syscall.Kill(-c.pgid, 0) != syscall.ESRCH {
		return true
	}
	if childless {
		return false
	}
	if populated, ok := cgroupPopulated(c.cgroup); ok {
		return populated
	}
	return len(descendants(c.forkTid)) > 0
}

// kill sends SIGKILL to every process of COMMAND.
func (c *Command) kill() { c.signal(syscall.SIGKILL) }

// stop ends every process of COMMAND: SIGTERM (and SIGCONT, so that a
// stopped process can act on it), then SIGKILL after grace, or at once
// when a terminating signal arrives on sigs meanwhile. It returns once
// they are all gone, or after a bounded wait for processes that ignore even
// SIGKILL (uninterruptible sleep).
func (c *Command) stop(grace time.Duration, sigs <-chan os.Signal) {
	if !c.alive() {
		return
	}
	c.signal(syscall.SIGTERM)
	c.signal(syscall.SIGCONT)
	if waitGone(c, grace, sigs) {
		return
	}
	c.Kill()
	waitGone(c, 5*time.Second, nil)
}

// waitGone waits until every process of COMMAND is gone (true), or d
// passes or a terminating signal arrives on sigs (false).
func waitGone(c *Command, d time.Duration, sigs <-chan os.Signal) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		done, wake := c.done, (<-chan time.Time)(nil)
		if c.Exited() {
			if !c.alive() {
				return true
			}
			done, wake = nil, tick.C
		}
		select {
		case <-done:
		case <-wake:
		case <-deadline.C:
			return false
		case s := <-sigs:
			if terminating(s) {
				return false
			}
		}
	}
}

func terminatingSignals() []os.Signal {
	return []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}
}
