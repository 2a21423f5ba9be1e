//go:build linux

package etcdcmd_test

import (
	"context"
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
	run := cliRunner(t, c.Endpoints())
	withEnv := cliRunner(t, c.Endpoints(), "LEADERRUN_ETCD_USER=root", "LEADERRUN_ETCD_PASSWORD=s3cret")
	if out, code := run("--user", "root:s3cret", "--name", "job", "--", "echo", "ran"); code != 0 || !strings.Contains(out, "ran") {
		t.Errorf("with --user: exit %d, %q", code, out)
	}
	if out, code := withEnv("status"); code != 0 {
		t.Errorf("with LEADERRUN_ETCD_USER: exit %d, %q", code, out)
	}
	out, code := run("--name", "job", "--", "echo", "ran")
	if code != cmd.ExitNoPerm || !strings.Contains(out, "give --user USER[:PASSWORD]") || strings.Contains(out, "ran\n") {
		t.Errorf("without credentials: exit %d, %q; want %d and the hint", code, out, cmd.ExitNoPerm)
	}
	if out, code := run("--user", "root:wrong", "status"); code != cmd.ExitNoPerm {
		t.Errorf("with a wrong password: exit %d, %q; want %d", code, out, cmd.ExitNoPerm)
	}
}
