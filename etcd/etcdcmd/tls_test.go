//go:build linux

package etcdcmd_test

import (
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/etcd/internal/etcdtest"
)

// TestTLS: against an etcd that serves https only and requires client
// certificates, leaderrun-etcd runs with etcdctl's --cacert, --cert and
// --key; without a client certificate it cannot get in (69), and --cert
// without --key is a usage error (64).
func TestTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and leaderrun-etcd processes")
	}
	etcdtest.Require(t)
	c, err := etcdtest.Start(etcdtest.Options{TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	run := cliRunner(t, c.Endpoints())
	f := c.TLS
	if out, code := run("--cacert", f.CA, "--cert", f.ClientCert, "--key", f.ClientKey, "--name", "job", "--", "echo", "ran"); code != 0 || !strings.Contains(out, "ran") {
		t.Errorf("with the client certificate: exit %d, %q", code, out)
	}
	if out, code := run("--cacert", f.CA, "--name", "job", "--", "echo", "ran"); code != cmd.ExitUnavailable || strings.Contains(out, "ran\n") {
		t.Errorf("without a client certificate: exit %d, %q; want %d", code, out, cmd.ExitUnavailable)
	}
	if out, code := run("--cacert", f.CA, "--cert", f.ClientCert, "status"); code != cmd.ExitUsage || !strings.Contains(out, "--cert and --key go together") {
		t.Errorf("--cert without --key: exit %d, %q; want %d", code, out, cmd.ExitUsage)
	}
}
