//go:build !linux

package cmd

import (
	"context"
	"os/exec"

	"github.com/leaderrun/leaderrun/oslock"
)

// The fence needs /proc, pidfds and cgroups; elsewhere no term is marked
// and a COMMAND whose leaderrun was killed with SIGKILL is not stopped by
// the next leader. See doc.go.
const fenceSupported = false

func fenceTerm(context.Context, *termRecord) bool { return true }
func wrapperAlive(*termRecord) bool               { return false }
func procStart(int) (uint64, bool)                { return 0, false }
func selfStart() uint64                           { return 0 }

const selfPidNS = 0

func lockHolders(*oslock.Dir, string) map[int]bool { return nil }

type termCgroup struct{ path string }

func newTermCgroup(string) *termCgroup                { return nil }
func (c *termCgroup) prepare(*exec.Cmd)               {}
func (c *termCgroup) remove(ctx context.Context) bool { return true }
