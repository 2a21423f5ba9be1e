package supervise

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/oslock"
)

// COMMAND gets the terminal the way a shell gives it to a job: when
// leaderrun's process group is the foreground group of its controlling
// terminal, COMMAND's group becomes the foreground group
// (SysProcAttr.Foreground) and leaderrun's is put back once COMMAND has
// exited. So a COMMAND that reads the terminal (a prompt, less, a
// password read from /dev/tty) is not stopped by SIGTTIN, and Ctrl-C
// reaches it as it would without leaderrun, whatever leaderrun's stdin is
// (seq 200 | leaderrun -- less): the terminal is leaderrun's controlling
// terminal, opened as /dev/tty, not its stdin.
//
// The one exception is a pipeline that leaderrun writes into (leaderrun
// -- cmd | less): the other commands share leaderrun's group and would
// lose the terminal, so when stdout is not a terminal COMMAND gets it only
// if no other process shares leaderrun's group (its ancestors, such as a
// shell without job control waiting for it, do not count).

// ctty is leaderrun's controlling terminal, opened once (close-on-exec:
// COMMAND does not inherit the descriptor), or -1 when it has none.
var ctty = sync.OnceValue(func() int {
	fd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1
	}
	return fd
})

// foregroundTTY reports whether COMMAND should get the terminal, and the
// descriptor of the terminal.
func foregroundTTY() (int, bool) {
	fd := ctty()
	if fd < 0 {
		return -1, false
	}
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || pgrp != unix.Getpgrp() {
		return -1, false
	}
	if _, err := unix.IoctlGetTermios(1, unix.TCGETS); err == nil {
		return fd, true
	}
	return fd, aloneInGroup(pgrp)
}

// aloneInGroup reports whether no process but this one and its ancestors
// is in process group pgrp: no other command of a pipeline shares it.
func aloneInGroup(pgrp int) bool {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	self := os.Getpid()
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if pgrpOf(pid) == pgrp && !isAncestor(pid) {
			return false
		}
	}
	return true
}

// pgrpOf is the process group of pid (/proc/PID/stat), or 0.
func pgrpOf(pid int) int {
	pgrp, _ := oslock.StatNumber(pid, 5)
	return int(pgrp)
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
	err := unix.IoctlSetPointerInt(ctty(), unix.TIOCSPGRP, pgrp)
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return err
}

// restoreForeground gives the terminal back to leaderrun's group if
// COMMAND's group pgid still has it: a shell that took it meanwhile keeps
// it.
func restoreForeground(pgid int) {
	if fg, err := unix.IoctlGetInt(ctty(), unix.TIOCGPGRP); err == nil && fg == pgid {
		_ = setForeground(unix.Getpgrp())
	}
}

// watchStops reports on c.stopped each time COMMAND's main process is
// stopped (Ctrl-Z, SIGTTIN, SIGSTOP). waitid without WEXITED consumes
// only the stop report, never the exit status that cmd.Wait collects; it
// returns ECHILD once the process has exited.
func watchStops(c *Command) {
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
func (c *Command) suspend() {
	if oslock.StateOf(c.pgid) != oslock.ProcStopped {
		return
	}
	restoreForeground(c.pgid)
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	if fg, err := unix.IoctlGetInt(ctty(), unix.TIOCGPGRP); err == nil && fg == unix.Getpgrp() {
		_ = setForeground(c.pgid)
	}
	_ = syscall.Kill(-c.pgid, syscall.SIGCONT)
}

// watchHangup returns a channel closed when the terminal hangs up
// (closed, its session leader gone), or nil when COMMAND does not get the
// terminal (foregroundTTY): a background leaderrun that was disowned must
// survive it.
// poll(2) with no events asked reports only that (POLLHUP), and does not
// touch the terminal's input, which belongs to COMMAND. It keeps one
// thread blocked in poll for leaderrun's life, in a terminal only.
func watchHangup() <-chan struct{} {
	fd, ok := foregroundTTY()
	if !ok {
		return nil
	}
	hup := make(chan struct{})
	go func() {
		fds := []unix.PollFd{{Fd: int32(fd)}}
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
