//go:build linux

package etcdcmd_test

import (
	"net"
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
	// Door errors name their cause, and come at once, not after the
	// dial timeout (an hour here: the test's own timeout would end it).
	slow := func(args ...string) (string, int) { return run(append([]string{"--dial-timeout", "1h"}, args...)...) }
	other, err := etcdtest.MakeTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if out, code := slow("--cacert", other.CA, "--cert", f.ClientCert, "--key", f.ClientKey, "status"); code != cmd.ExitUnavailable || !strings.Contains(out, "x509") || !strings.Contains(out, c.Endpoints()[0]) {
		t.Errorf("a CA that did not sign the server's certificate: exit %d, %q; want %d naming the x509 cause and the endpoint", code, out, cmd.ExitUnavailable)
	}
	if out, code := slow("--cacert", f.CA, "status"); code != cmd.ExitUnavailable || !strings.Contains(out, "refused the TLS handshake") {
		t.Errorf("no client certificate: exit %d, %q; want %d saying the server refused the handshake", code, out, cmd.ExitUnavailable)
	}
	plain := strings.Replace(c.Endpoints()[0], "https://", "http://", 1)
	if out, code := slow("--etcd-endpoints", plain, "status"); code != cmd.ExitUnavailable || !strings.Contains(out, "speaks TLS") {
		t.Errorf("http:// to a TLS port: exit %d, %q; want %d saying it speaks TLS", code, out, cmd.ExitUnavailable)
	}
}

// TestRefusedAtOnce: an endpoint where nothing listens fails at once with
// exit 69, naming the endpoint, instead of after the dial timeout (an
// hour here).
func TestRefusedAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts leaderrun-etcd processes")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ep := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	run := cliRunner(t, []string{ep})
	for _, args := range [][]string{{"--name", "job", "--", "echo", "ran"}, {"status"}, {"-n", "--name", "job", "--", "true"}} {
		out, code := run(append([]string{"--dial-timeout", "1h"}, args...)...)
		if code != cmd.ExitUnavailable || !strings.Contains(out, ep) || !strings.Contains(out, "connection refused") {
			t.Errorf("%q: exit %d, %q; want %d naming %s and the refusal", args, code, out, cmd.ExitUnavailable, ep)
		}
	}
}
