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
	cmd := exec.Command(argv[0], argv[1:]...)
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
	// exec.Command's own lookup error, if any, is reported by checkCommand
	// before the lock is requested.
	cmd.Err = nil
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
