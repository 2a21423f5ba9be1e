//go:build unix && !linux

package cmd

import "time"

// startAndWait starts COMMAND. Without Pdeathsig, a COMMAND whose leaderrun
// is killed with SIGKILL keeps running; see doc.go.
func startAndWait(c *child) error {
	if err := c.cmd.Start(); err != nil {
		return err
	}
	c.pgid = c.cmd.Process.Pid
	c.started = time.Now()
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.done)
	}()
	return nil
}

func reapOrphans()       {}
func descendants() []int { return nil }
