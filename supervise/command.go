package supervise

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Command is one run of COMMAND: the leader of its own process group, so
// that signals and the final stop reach every process it started. Start
// it with Start, or with Term.Start in a term.
type Command struct {
	cmd     *exec.Cmd
	pgid    int
	started time.Time
	done    chan struct{} // closed once Wait has returned
	tty     bool          // COMMAND's group was given the terminal (tty_linux.go)
	stopped chan struct{} // COMMAND's main process was stopped; only with tty
	forkTid int           // the thread that forked it (Linux; 0: not known)
	cgroup  string        // the term's cgroup COMMAND was started in (Linux), or ""
}

// The exit statuses Status reports besides COMMAND's own: sysexits.h's
// EX_SOFTWARE, and a shell's 128+N for a death by signal N (cmd's
// ExitSoftware and ExitSignalBase).
const (
	exitSoftware = 70
	signalBase   = 128
)

// Done is closed once COMMAND's main process has been waited for.
func (c *Command) Done() <-chan struct{} { return c.done }

// Stopped receives when COMMAND's main process was stopped (SIGTSTP,
// Ctrl-Z) while it had the terminal; never otherwise.
func (c *Command) Stopped() <-chan struct{} { return c.stopped }

// Started is when COMMAND started.
func (c *Command) Started() time.Time { return c.started }

// newCmd prepares COMMAND. Lock descriptors are O_CLOEXEC and are not
// passed on: COMMAND never holds the lock itself (see doc.go).
func newCmd(argv, env []string, stdout io.Writer) *exec.Cmd {
	// Made by hand, not with exec.Command, whose own PATH search would be
	// a second one. A COMMAND not found (checkCommand reported it before
	// the lock was requested; it may have gone since) fails in Start with
	// exec's error.
	cmd := &exec.Cmd{Path: argv[0], Args: argv}
	if path, err := LookPath(argv[0]); err == nil {
		cmd.Path = path // PATH unset: the default search path
	}
	cmd.Env = env
	cmd.Stdin = os.Stdin
	cmd.Stdout = stdout
	cmd.Stderr = os.Stderr
	if _, ok := stdout.(*os.File); !ok {
		// A pipe that a leftover grandchild keeps open must not keep
		// Wait from returning: stop() deals with the grandchild.
		cmd.WaitDelay = time.Second
	}
	return cmd
}

// Exited reports whether COMMAND's main process has been waited for.
func (c *Command) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Status is COMMAND's exit status as a shell reports it: its exit code, or
// 128+N when it died of signal N; 70 (EX_SOFTWARE) before it was waited
// for.
func (c *Command) Status() int {
	ps := c.cmd.ProcessState
	if ps == nil {
		return exitSoftware
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return signalBase + int(ws.Signal())
	}
	return ps.ExitCode()
}

// Start starts COMMAND, argv with env, writing to stdout; prepare may
// change the exec.Cmd before it starts (descriptors to pass on). On Unix
// COMMAND leads a process group of its own, and gets the terminal when
// this process is in the terminal's foreground (Linux). A failed start's
// error is exec's (see LookPath). Term.Start starts COMMAND in a term.
func Start(argv, env []string, stdout io.Writer, prepare ...func(*exec.Cmd)) (*Command, error) {
	return startChild(argv, env, stdout, prepare...)
}

// Signal forwards sig to COMMAND's process group (to COMMAND alone
// without process groups).
func (c *Command) Signal(sig os.Signal) { c.signalGroup(sig) }

// Kill sends SIGKILL to every process of COMMAND: its process group and,
// on Linux, every process that left it but is still this process's
// descendant.
func (c *Command) Kill() { c.kill() }

// Stop ends every process of COMMAND: SIGTERM (and SIGCONT, so that a
// stopped process can act on it), then SIGKILL after grace, or at once
// when a terminating signal arrives on sigs meanwhile. It returns once
// they are all gone, or after a bounded wait for processes that ignore
// even SIGKILL (uninterruptible sleep). Without POSIX signals COMMAND is
// killed at once.
func (c *Command) Stop(grace time.Duration, sigs <-chan os.Signal) { c.stop(grace, sigs) }

// Suspend follows COMMAND into a job-control stop (Linux, when COMMAND
// has the terminal; Stopped said so): the terminal goes back to this
// process's group and this process stops itself, so that the shell sees
// its job stopped; when the shell continues it, COMMAND's group is
// continued too, and gets the terminal back in the foreground. Elsewhere
// it does nothing.
func (c *Command) Suspend() { c.suspend() }

// Forwarded are the signals passed on to COMMAND's process group: SIGINT,
// SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 (os.Interrupt without
// POSIX signals).
func Forwarded() []os.Signal { return forwarded() }

// Terminating reports whether sig asks the supervisor to finish: after
// it, COMMAND is not restarted (all of Forwarded but SIGUSR1 and SIGUSR2).
func Terminating(sig os.Signal) bool { return terminating(sig) }

// TerminatingSignals are the signals that end the supervisor.
func TerminatingSignals() []os.Signal { return terminatingSignals() }

// SignalNumber is sig's number, for an exit status of 128+N.
func SignalNumber(sig os.Signal) int { return signalNumber(sig) }

// IsAncestor reports whether pid is a living ancestor of this process: on
// Linux by the parent chain in /proc/PID/stat; on other Unix systems it
// trusts the caller and checks only that pid is alive; false elsewhere.
func IsAncestor(pid int) bool { return isAncestor(pid) }

// WatchHangup returns a channel closed when the terminal hangs up (closed,
// its session leader gone), or nil when COMMAND does not get the terminal
// (not Linux, or not in the terminal's foreground): a background
// supervisor that was disowned must survive it. It keeps one thread
// blocked in poll(2) for the process's life, in a terminal only.
func WatchHangup() <-chan struct{} { return watchHangup() }
