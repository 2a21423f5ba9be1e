package supervise

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/oslock"
)

func init() {
	// Orphaned grandchildren of COMMAND (double forks, setsid) are handed
	// to leaderrun instead of init, so that stop can still find and end
	// them, and so that their zombies do not keep the process group alive.
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// startAndWait starts COMMAND with Pdeathsig, so that the kernel kills it
// when leaderrun dies, even of SIGKILL. Pdeathsig follows the thread that
// forked, not the process (golang/go#27505): the start and the wait happen
// on one goroutine locked to its thread for the child's whole life.
func startAndWait(c *Command) error {
	c.cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		c.forkTid = unix.Gettid() // read after started, as pgid is
		if err := c.cmd.Start(); err != nil {
			started <- err
			return // the thread exits with the goroutine
		}
		c.pgid = c.cmd.Process.Pid
		c.started = time.Now()
		if c.tty {
			go watchStops(c)
		}
		started <- nil
		_ = c.cmd.Wait() // the status is read from ProcessState
		if c.tty {
			restoreForeground(c.pgid)
		}
		// The child is gone, and its Pdeathsig with it: the thread may
		// serve other goroutines again. Kept locked, it would exit with
		// this goroutine, and the goroutine woken by done would wait for
		// another thread to be woken, on the way from COMMAND's exit to
		// the release.
		runtime.UnlockOSThread()
		close(c.done)
	}()
	return <-started
}

// reapOrphans collects the zombies of COMMAND's orphans, which the
// subreaper setting made leaderrun's children. It runs only after COMMAND's
// main process has been waited for, so it cannot steal that status.
//
// It reports whether leaderrun has no child left at all (ECHILD): then it
// has no descendant either, since an orphan of a descendant becomes
// leaderrun's child (the subreaper), and the scan of /proc that alive and
// signal otherwise make can be skipped: the common end of a COMMAND that
// exited with nothing left behind costs one wait4 instead of reading
// /proc/PID/task/TID/children of every thread.
func reapOrphans() (childless bool) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.ECHILD {
			return true
		}
		if pid <= 0 || err != nil {
			return false
		}
	}
}

// descendants lists leaderrun's living descendants, from
// /proc/PID/task/TID/children (Linux 3.5 and later, CONFIG_PROC_CHILDREN).
// It reads them in plain system calls (os.ReadDir and os.ReadFile would
// try each in the runtime's poller first): a term's watchdog is
// leaderrun's child, so the end of every term makes this scan, on the
// path of the hand-off.
//
// Of leaderrun's own threads it reads two, where forkTid (the thread that
// forked COMMAND) is known: COMMAND is that thread's child, and an orphan
// of COMMAND's tree is handed to the first live thread of its subreaper
// (find_alive_thread, kernel/exit.c), which is the main thread, as are the
// children of a thread that exits; a Go program's main thread never ends.
// Its other threads fork only the watchdog and the runtime's probe child.
// Reading every thread (8 of them, and their /proc entries made for it)
// cost 0.2 ms a hand-off in a chain's profile, and its parent as much
// again to reap it. The descendants' own threads are all read.
func descendants(forkTid int) []int {
	var out, queue []int
	buf := make([]byte, 4096)
	scan := func(task string, tids []string) {
		for _, tid := range tids {
			b, _ := readSmall(task+tid+"/children", buf)
			for _, f := range strings.Fields(string(b)) {
				if k, err := strconv.Atoi(f); err == nil && !isWatchdog(k) && !isZombie(k) {
					out = append(out, k)
					queue = append(queue, k)
				}
			}
		}
	}
	self := strconv.Itoa(os.Getpid())
	task := "/proc/" + self + "/task/"
	switch tid := strconv.Itoa(forkTid); {
	case forkTid == 0:
		scan(task, dirNames(task, buf))
	case tid == self:
		scan(task, []string{self})
	default:
		scan(task, []string{self, tid})
	}
	for len(queue) > 0 {
		task := "/proc/" + strconv.Itoa(queue[0]) + "/task/"
		queue = queue[1:]
		scan(task, dirNames(task, buf))
	}
	return out
}

// dirNames lists the directory dir, with buf for the reads.
func dirNames(dir string, buf []byte) []string {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	var names []string
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil || n <= 0 {
			return names
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// isZombie reports whether pid is gone: reaped, or a zombie whose threads
// have all exited (see oslock.StateOf).
func isZombie(pid int) bool { return oslock.StateOf(pid) == oslock.ProcGone }

// isAncestor reports whether pid is a living ancestor of this process,
// walking the parent chain in /proc/PID/stat.
func isAncestor(pid int) bool {
	for p, hops := os.Getppid(), 0; p > 1 && hops < 4096; hops++ {
		if p == pid {
			return !isZombie(pid)
		}
		p = parentOf(p)
	}
	return false
}

// parentOf is the ppid field of /proc/PID/stat, or 0.
func parentOf(pid int) int {
	ppid, _ := oslock.StatNumber(pid, 4)
	return int(ppid)
}

// warmSpawn pays, on another goroutine while the lock is awaited, what
// os/exec's first start would pay on the way to COMMAND: the runtime's
// check that pidfds work (pidfd_open, waitid, and a probe child cloned
// with CLONE_PIDFD that exits at once), done once per process.
// os.StartProcess waits for the check if it is still running.
func warmSpawn() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		p.Release()
	}
}
