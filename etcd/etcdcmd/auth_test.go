//go:build linux

package etcdcmd_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/etcd/internal/etcdtest"
)

// TestAuth: against an etcd with authentication on, leaderrun-etcd runs
// with --user USER:PASSWORD (and LEADERRUN_ETCD_USER), its watchdog too,
// and without credentials it exits 77 and says to give --user.
func TestAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and leaderrun-etcd processes")
	}
	etcdtest.Require(t)
	c := etcdtest.StartT(t, 1)
	ctx := context.Background()
	cli := c.Client(t)
	for _, step := range []func() error{
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "root", "s3cret"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	bin := cliBinary(t)
	dir := filepath.Join(t.TempDir(), "locks")
	os.Mkdir(dir, 0o700)
	run := func(env []string, args ...string) (string, int) {
		c := exec.Command(bin, append([]string{"--etcd-endpoints", strings.Join(c.Endpoints(), ","), "--dir", dir, "--ttl", "4s", "--grace", "1s"}, args...)...)
		c.Env = append(os.Environ(), env...)
		out, _ := c.CombinedOutput()
		return string(out), c.ProcessState.ExitCode()
	}
	if out, code := run(nil, "--user", "root:s3cret", "--name", "job", "--", "echo", "ran"); code != 0 || !strings.Contains(out, "ran") {
		t.Errorf("with --user: exit %d, %q", code, out)
	}
	if out, code := run([]string{"LEADERRUN_ETCD_USER=root", "LEADERRUN_ETCD_PASSWORD=s3cret"}, "status"); code != 0 {
		t.Errorf("with LEADERRUN_ETCD_USER: exit %d, %q", code, out)
	}
	out, code := run(nil, "--name", "job", "--", "echo", "ran")
	if code != cmd.ExitNoPerm || !strings.Contains(out, "give --user USER[:PASSWORD]") || strings.Contains(out, "ran\n") {
		t.Errorf("without credentials: exit %d, %q; want %d and the hint", code, out, cmd.ExitNoPerm)
	}
	if out, code := run(nil, "--user", "root:wrong", "status"); code != cmd.ExitNoPerm {
		t.Errorf("with a wrong password: exit %d, %q; want %d", code, out, cmd.ExitNoPerm)
	}
}
