//go:build !unix

package supervise

import (
	"io"
	"os"
	"os/exec"
	"time"
)

// Without process groups and POSIX signals, only COMMAND itself is
// signalled, and it is killed (not asked) when it must stop.

// Forwarded are the signals passed on to COMMAND.
func Forwarded() []os.Signal { return []os.Signal{os.Interrupt} }

// Terminating reports whether sig asks the supervisor to finish.
func Terminating(os.Signal) bool { return true }

// SignalNumber is sig's number, for an exit status of 128+N.
func SignalNumber(os.Signal) int { return 2 }

// Start starts COMMAND, argv with env, writing to stdout.
func Start(argv, env []string, stdout io.Writer, prepare ...func(*exec.Cmd)) (*Command, error) {
	return startChild(argv, env, stdout, prepare...)
}

func startChild(argv, env []string, stdout io.Writer, _ ...func(*exec.Cmd)) (*Command, error) {
	c := &Command{cmd: newCmd(argv, env, stdout), done: make(chan struct{})}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	c.pgid = c.cmd.Process.Pid
	c.started = time.Now()
	go func() {
		_ = c.cmd.Wait() // the status is read from ProcessState
		close(c.done)
	}()
	return c, nil
}

func (c *Command) Signal(sig os.Signal) { _ = c.cmd.Process.Signal(sig) }

func (c *Command) Kill() { _ = c.cmd.Process.Kill() }

func (c *Command) Stop(grace time.Duration, sigs <-chan os.Signal) {
	if c.Exited() {
		return
	}
	_ = c.cmd.Process.Kill()
	<-c.done
}

func IsAncestor(int) bool { return false }

// TerminatingSignals are the signals that end the supervisor.
func TerminatingSignals() []os.Signal { return []os.Signal{os.Interrupt} }
