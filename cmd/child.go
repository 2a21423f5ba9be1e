package cmd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// child is one run of COMMAND: the leader of its own process group, so that
// signals and the final stop reach every process it started.
type child struct {
	cmd     *exec.Cmd
	pgid    int
	started time.Time
	done    chan struct{} // closed once Wait has returned
	waitErr error
	tty     bool          // COMMAND's group was given the terminal (tty_linux.go)
	stopped chan struct{} // COMMAND's main process was stopped; only with tty
}

// newCmd prepares COMMAND. Lock descriptors are O_CLOEXEC and are not
// passed on: COMMAND never holds the lock itself (see doc.go).
func newCmd(argv, env []string, stdout io.Writer) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
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

// exited reports whether COMMAND's main process has been waited for.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// status is COMMAND's exit status as a shell reports it: its exit code, or
// 128+N when it died of signal N.
func (c *child) status() int {
	ps := c.cmd.ProcessState
	if ps == nil {
		return ExitSoftware
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ExitSignalBase + int(ws.Signal())
	}
	return ps.ExitCode()
}

// checkCommand resolves COMMAND before the lock is requested, so that a typo
// fails at once with 127 (or 126) instead of after waiting in line.
func checkCommand(name string) error {
	path, err := exec.LookPath(name)
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, exec.ErrDot):
		return exitf(ExitNotFound, "leaderrun: %s resolves to %s in the current directory, which PATH lookups refuse; write ./%s", name, path, name)
	case errors.Is(err, fs.ErrPermission):
		return exitf(ExitNoExec, "leaderrun: %s is not executable; chmod +x it, or run it through its interpreter (leaderrun -- sh %s)", name, name)
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		hint := "check the spelling and $PATH"
		if isSubcommand(name) {
			hint = fmt.Sprintf("to run the %s command, write leaderrun %s without --", name, name)
		}
		return exitf(ExitNotFound, "leaderrun: %s: command not found; %s", name, hint)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return exitf(ExitNoExec, "leaderrun: cannot execute %s: %v", name, pe.Err)
	}
	return exitf(ExitNotFound, "leaderrun: %v", err)
}

// startError maps a failed start to 126 or 127.
func startError(name string, err error) error {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return exitf(ExitNotFound, "leaderrun: %s: command not found: %v", name, err)
	default:
		return exitf(ExitNoExec, "leaderrun: cannot execute %s: %v", name, err)
	}
}
