//go:build linux

package etcdcmd_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/etcd"
	"github.com/leaderrun/leaderrun/etcd/internal/etcdtest"
)

// TestDeadHolderEnded: the leading wrapper on host A is SIGKILLed (its
// watchdog too in the second case, with its COMMAND left running and
// another wrapper waiting on host A). The waiter on host B starts within
// 30 s although the lease lasts 60 s, so the term was ended, not expired;
// and A's COMMAND was gone by then.
func TestDeadHolderEnded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and leaderrun-etcd processes")
	}
	etcdtest.Require(t)
	c := etcdtest.StartT(t, 1)
	ep := strings.Join(c.Endpoints(), ",")
	bin := cliBinary(t)
	lk, err := etcd.Open(etcd.Config{Endpoints: c.Endpoints(), Prefix: "/bench/"})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	start := func(host, dir, name, cmdline string) *exec.Cmd {
		return exec.Command(bin, "--etcd-endpoints", ep, "--etcd-prefix", "/bench/", "--ttl", "60s", "--grace", "0s",
			"--dir", dir, "--host", host, "--name", name, "--", "sh", "-c", cmdline)
	}
	for _, tc := range []struct {
		name string
		kill victims
	}{{"watchdog", wrapperOnly}, {"local-waiter", wrapperAndWatchdog}} {
		t.Run(tc.name, func(t *testing.T) {
			gap, overlap := failoverOnce(t, lk, start, false, tc.kill, "dead-"+tc.name)
			if overlap {
				t.Fatal("A's COMMAND still ran when B's started")
			}
			t.Logf("B's COMMAND started %v after the SIGKILL", gap)
		})
	}
}

// cliRunner runs leaderrun-etcd against eps with a private lock
// directory and a short TTL, and returns its output and exit status.
func cliRunner(t *testing.T, eps []string, env ...string) func(args ...string) (string, int) {
	bin := cliBinary(t)
	dir := filepath.Join(t.TempDir(), "locks")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return func(args ...string) (string, int) {
		c := exec.Command(bin, append([]string{"--etcd-endpoints", strings.Join(eps, ","), "--dir", dir, "--ttl", "4s", "--grace", "1s", "--dial-timeout", "2s"}, args...)...)
		c.Env = append(os.Environ(), env...)
		out, _ := c.CombinedOutput()
		return string(out), c.ProcessState.ExitCode()
	}
}
