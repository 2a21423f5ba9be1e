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

func forwarded() []os.Signal { return []os.Signal{os.Interrupt} }

func terminating(os.Signal) bool { return true }

func signalNumber(os.Signal) int { return 2 }

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

func (c *Command) signalGroup(sig os.Signal) { _ = c.cmd.Process.Signal(sig) }

func (c *Command) kill() { _ = c.cmd.Process.Kill() }

func (c *Command) stop(grace time.Duration, sigs <-chan os.Signal) {
	if c.Exited() {
		return
	}
	_ = c.cmd.Process.Kill()
	<-c.done
}

func isAncestor(int) bool { return false }

func terminatingSignals() []os.Signal { return []os.Signal{os.Interrupt} }
