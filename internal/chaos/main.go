//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

// The roles of the test binary, named by [proctest.RoleEnv] in the
// environment, which leaderrun passes on to COMMAND and itself ignores.
const (
	RoleCommand    = "chaos-command"
	RoleGrandchild = "chaos-grandchild"
)

// watchdogRole is the variable with which package supervise starts the
// term's watchdog from /proc/self/exe: that is leaderrun's, too.
const watchdogRole = "LEADERRUN_INTERNAL_ROLE"

// Main is TestMain of a chaos suite. Started through the link named link
// (or as leaderrun's watchdog), the test binary runs leaderrun, which
// returns the command's exit code; in a role of this package it plays
// that role; otherwise it runs the tests with [Bin] set to the link, which
// it removes after. It does not return.
func Main(m *testing.M, link string, leaderrun func() int) {
	if os.Getenv(watchdogRole) != "" || filepath.Base(os.Args[0]) == link {
		os.Exit(leaderrun())
	}
	proctest.Main(map[string]func() int{
		RoleCommand:    command,
		RoleGrandchild: grandchild,
	})
	os.Exit(runTests(m, link))
}

// Bin is the link to the test binary through which it is leaderrun, set
// by [Main] for the tests.
var Bin string

func runTests(m *testing.M, link string) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	Bin = filepath.Join(dir, link)
	if err := os.Symlink(self, Bin); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	return m.Run()
}
