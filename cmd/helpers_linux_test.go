package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/leaderrun/leaderrun/oslock"
)

// The helpers of the tests that run leaderrun as a process of its own
// (deadline_linux_test.go, tty_linux_test.go); the fence's own tests,
// with their helper roles, are package supervise's.

// helperCmd re-executes the test binary in role (with proctest.RoleEnv=helper set by the
// caller), with ARGS after it.
func helperCmd(role string, args ...string) *exec.Cmd {
	c := exec.Command(os.Args[0], append([]string{"-test.run=^$", role}, args...)...)
	c.Env = os.Environ()
	return c
}

func running(pid int) bool { return oslock.StateOf(pid) != oslock.ProcGone }

// termLockDir makes a private lock directory.
func termLockDir(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "locks")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}
