//go:build unix && !linux

package supervise

import (
	"syscall"
	"time"
)

// startAndWait starts COMMAND. Without Pdeathsig, a COMMAND whose leaderrun
// is killed with SIGKILL keeps running; see doc.go.
func startAndWait(c *Command) error {
	if err := c.cmd.Start(); err != nil {
		return err
	}
	c.pgid = c.cmd.Process.Pid
	c.started = time.Now()
	go func() {
		_ = c.cmd.Wait() // the status is read from ProcessState
		close(c.done)
	}()
	return nil
}

func reapOrphans() bool     { return false }
func descendants(int) []int { return nil }

// isAncestor cannot walk the parent chain without /proc: it trusts the
// environment and checks only that pid is alive.
func isAncestor(pid int) bool { return syscall.Kill(pid, 0) == nil }
