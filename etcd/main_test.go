package etcd

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/etcd/internal/etcdtest"

	"github.com/leaderrun/leaderrun/internal/backendtest"
	"github.com/leaderrun/leaderrun/internal/proctest"
)

// TestMain runs a role when the test binary is re-executed as a contender
// (see role_test.go), and otherwise the tests, with one shared
// single-member etcd started on first use.
func TestMain(m *testing.M) {
	if r := os.Getenv(proctest.RoleEnv); r != "" {
		os.Exit(runRole(r))
	}
	code := m.Run()
	shared.Close()
	os.Exit(code)
}

var (
	shared   backendtest.Shared[*etcdtest.Cluster]
	prefixes atomic.Int64
)

// sharedCluster is one etcd member for the tests that do not harm it.
func sharedCluster(t testing.TB) *etcdtest.Cluster {
	t.Helper()
	etcdtest.Require(t)
	return shared.Get(t, func() (*etcdtest.Cluster, error) { return etcdtest.Start(etcdtest.Options{Members: 1}) })
}

// testPrefix is a key prefix no other test uses.
func testPrefix(t testing.TB) string {
	n := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/lrtest/%s-%d/", n, prefixes.Add(1))
}

// open opens a Locker on c under prefix, closed when t ends.
func open(t testing.TB, c *etcdtest.Cluster, prefix string, cfg Config) *Locker {
	t.Helper()
	cfg.Endpoints = c.Endpoints()
	cfg.Prefix = prefix
	if cfg.TTL == 0 {
		cfg.TTL = 4 * time.Second
	}
	l, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
