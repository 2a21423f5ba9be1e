package pg

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/backendtest"
	"github.com/leaderrun/leaderrun/internal/proctest"
	"github.com/leaderrun/leaderrun/pg/internal/pgtest"
)

// TestMain runs a role when the test binary is re-executed as a contender
// (see role_test.go), and otherwise the tests, with one shared server
// started on first use.
func TestMain(m *testing.M) {
	proctest.Main(map[string]func() int{"contender": runContender})
	code := m.Run()
	shared.Close()
	os.Exit(code)
}

var (
	shared  backendtest.Shared[*pgtest.Server]
	schemas atomic.Int64
)

// sharedServer is one server for the tests that do not harm it.
func sharedServer(t testing.TB) *pgtest.Server {
	t.Helper()
	pgtest.Require(t)
	return shared.Get(t, pgtest.Start)
}

// testSchema is a schema no other test uses: the tests' separate worlds.
func testSchema(t testing.TB) string {
	n := strings.ToLower(strings.NewReplacer("/", "_", " ", "_", "-", "_", "#", "_").Replace(t.Name()))
	if len(n) > 40 {
		n = n[len(n)-40:]
	}
	return fmt.Sprintf("lrt_%s_%d", n, schemas.Add(1))
}

// open opens a Locker on srv in schema, closed when t ends.
func open(t testing.TB, srv *pgtest.Server, schema string, cfg Config) *Locker {
	t.Helper()
	if cfg.URL == "" && cfg.ConnConfig == nil {
		cfg.URL = srv.URL()
	}
	cfg.Schema = schema
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
