package cmd

import (
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/oslock"
)

// COMMAND gets the terminal the way a shell gives it to a job, and the
// way flock(1) gets it by not making a process group of its own: when
// leaderrun's stdin and stdout are the terminal and its process group is
// the terminal's foreground group, COMMAND's group becomes the foreground
// group (SysProcAttr.Foreground) and leaderrun's is put back once COMMAND
// has exited. So a COMMAND that reads the terminal (a prompt, cat) is not
// stopped by SIGTTIN, and Ctrl-C reaches it as it would without
// leaderrun. stdout must be the terminal too: in a pipeline (leaderrun --
// cmd | less) the other commands share leaderrun's group and would lose
// the terminal.

// foregroundTTY reports whether COMMAND should get the terminal on fd 0.
func foregroundTTY() bool {
	pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	if err != nil || pgrp != unix.Getpgrp() {
		return false
	}
	_, err = unix.IoctlGetTermios(1, unix.TCGETS)
	return err == nil
}

// setForeground makes pgrp the terminal's foreground group. A process of
// a background group that asks this gets SIGTTOU unless it blocks that
// signal (tcsetpgrp(3)), which it does on its own thread only, so that
// COMMAND does not inherit an ignored SIGTTOU.
func setForeground(pgrp int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var block, old unix.Sigset_t
	n := uint(unix.SIGTTOU) - 1
	block.Val[n/64] |= 1 << (n % 64)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &block, &old); err != nil {
		return err
	}
	err := unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, pgrp)
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return err
}

// restoreForeground gives the terminal back to leaderrun's group if
// COMMAND's group pgid still has it: a shell that took it meanwhile keeps
// it.
func restoreForeground(pgid int) {
	if fg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); err == nil && fg == pgid {
		_ = setForeground(unix.Getpgrp())
	}
}

// watchStops reports on c.stopped each time COMMAND's main process is
// stopped (Ctrl-Z, SIGTTIN, SIGSTOP). waitid without WEXITED consumes
// only the stop report, never the exit status that cmd.Wait collects; it
// returns ECHILD once the process has exited.
func watchStops(c *child) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, c.pgid, &info, unix.WSTOPPED, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return
		}
		select {
		case c.stopped <- struct{}{}:
		default:
		}
	}
}

// suspend follows COMMAND into a job-control stop: the terminal goes back
// to leaderrun's group and leaderrun stops itself, so that the shell sees
// its job stopped and prints its prompt. When the shell continues it (fg,
// bg), COMMAND's group is continued too, and gets the terminal back if
// leaderrun is in the foreground again (fg).
//
// A report is acted on only while COMMAND is still stopped: one that
// arrives after leaderrun itself continued COMMAND is stale.
func (c *child) suspend() {
	if oslock.StateOf(c.pgid) != oslock.ProcStopped {
		return
	}
	restoreForeground(c.pgid)
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	if fg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); err == nil && fg == unix.Getpgrp() {
		_ = setForeground(c.pgid)
	}
	_ = syscall.Kill(-c.pgid, syscall.SIGCONT)
}

// watchHangup returns a channel closed when the terminal on fd 0 hangs up
// (closed, its session leader gone), or nil when COMMAND does not get the
// terminal (foregroundTTY): a background leaderrun that was disowned must
// survive it.
// poll(2) with no events asked reports only that (POLLHUP), and does not
// touch the terminal's input, which belongs to COMMAND. It keeps one
// thread blocked in poll for leaderrun's life, in a terminal only.
func watchHangup() <-chan struct{} {
	if !foregroundTTY() {
		return nil
	}
	hup := make(chan struct{})
	go func() {
		fds := []unix.PollFd{{Fd: 0}}
		for {
			_, err := unix.Poll(fds, -1)
			switch {
			case err == unix.EINTR:
			case err != nil:
				return
			case fds[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0:
				close(hup)
				return
			}
		}
	}()
	return hup
}
