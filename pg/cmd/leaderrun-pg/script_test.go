package main

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/leaderrun/leaderrun/internal/backendtest"
	"github.com/leaderrun/leaderrun/internal/scriptcmd"
	"github.com/leaderrun/leaderrun/pg/internal/pgtest"
	"github.com/leaderrun/leaderrun/pg/pgcmd"
)

// TestMain runs the test binary as leaderrun-pg for the scripts
// (backendtest.Main); otherwise it runs the tests, with one PostgreSQL
// server for all scripts, started on first use.
func TestMain(m *testing.M) {
	backendtest.Main(m, "pg", pgcmd.Options(), shared.Close)
}

var (
	shared    backendtest.Shared[*pgtest.Server]
	server    *pgtest.Server // once shared is started, for pgserver
	scriptSeq atomic.Int64
)

// sharedServer is the package's PostgreSQL: skipped without one, a
// failure under CI=true (pgtest.Require).
func sharedServer(t *testing.T) *pgtest.Server {
	t.Helper()
	pgtest.Require(t)
	server = shared.Get(t, pgtest.Start)
	return server
}

// TestScripts runs testdata/scripts/*.txtar against a real PostgreSQL on
// loopback. Each script gets:
//
//   - $LEADERRUN_PG_URL, the server (a role that owns the database, with
//     its password), and $LEADERRUN_PG_SCHEMA, a schema of its own;
//   - for the bad-input scripts: $PG_BADPW_URL (a wrong password),
//     $PG_NOPRIV_URL (a role that may create nothing), $PG_TLS_URL
//     (verify-full against the server's CA), $PG_TLS_BAD_URL (against
//     another CA) and $PG_PORT; $PG_SUPER_URL, the superuser over the
//     socket, for psql to inject faults;
//   - three simulated hosts: the lock directories $HA, $HB and $HC
//     ($WORK/hostA, hostB, hostC, mode 0700), which a command names with
//     --dir $HA --host A (and so on); $LEADERRUN_DIR=$HA and
//     $LEADERRUN_HOST=A are the defaults.
func TestScripts(t *testing.T) {
	s := sharedServer(t)
	testscript.Run(t, scriptParams(s, "testdata/scripts"))
}

// TestBusScripts runs testdata/bus/*.txtar: publish, subscribe, --fanout
// and who --json across simulated hosts, over the bus in PostgreSQL
// (pg/bus.go).
func TestBusScripts(t *testing.T) {
	s := sharedServer(t)
	testscript.Run(t, scriptParams(s, "testdata/bus"))
}

// TestFaultScripts runs testdata/faults/*.txtar, which restart or stop
// the server (pgserver), one at a time and apart from the other scripts.
func TestFaultScripts(t *testing.T) {
	s := sharedServer(t)
	p := scriptParams(s, "testdata/faults")
	p.Setup = serialSetup(p.Setup)
	testscript.Run(t, p)
}

var faultMu sync.Mutex

// serialSetup makes the scripts of a run take turns: each holds faultMu
// from its setup to its end.
func serialSetup(setup func(*testscript.Env) error) func(*testscript.Env) error {
	return func(env *testscript.Env) error {
		faultMu.Lock()
		env.Defer(faultMu.Unlock)
		return setup(env)
	}
}

func scriptParams(s *pgtest.Server, dir string) testscript.Params {
	tlsURL := func(ca string) string {
		return fmt.Sprintf("postgres://%s:%s@localhost:%d/%s?sslmode=verify-full&sslrootcert=%s", pgtest.User, pgtest.Password, s.Port, pgtest.Database, ca)
	}
	return testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			if err := backendtest.Hosts(env); err != nil {
				return err
			}
			env.Setenv("LEADERRUN_PG_URL", s.URL())
			env.Setenv("LEADERRUN_PG_SCHEMA", fmt.Sprintf("lrts_%d_%d", os.Getpid(), scriptSeq.Add(1)))
			env.Setenv("PG_BADPW_URL", s.URLOf(pgtest.User, "wrong-password"))
			env.Setenv("PG_NOPRIV_URL", s.URLOf(pgtest.NoPriv, pgtest.Password))
			env.Setenv("PG_TLS_URL", tlsURL(s.TLS.CA))
			env.Setenv("PG_TLS_BAD_URL", tlsURL(s.TLS.OtherCA))
			env.Setenv("PG_PORT", fmt.Sprint(s.Port))
			env.Setenv("PG_SUPER_URL", s.SocketURL(pgtest.Superuser, pgtest.Database))
			return nil
		},
		Cmds: scriptCmds(),
	}
}

// scriptCmds are the shared commands (internal/backendtest) and pgserver.
func scriptCmds() map[string]scriptcmd.Cmd {
	cmds := backendtest.Commands("pg", "LEADERRUN_PG_URL", "LEADERRUN_PG_SCHEMA")
	cmds["pgserver"] = cmdPgserver
	return cmds
}

// pgserver restart|stop|cont: an immediate restart of the scripts' server
// (every session ends), or SIGSTOP/SIGCONT of all its processes. A script
// that uses it must run alone: TestFaultScripts runs those.
func cmdPgserver(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: pgserver restart|stop|cont")
	}
	switch args[0] {
	case "restart":
		ts.Check(server.Restart())
	case "stop":
		server.Signal(syscall.SIGSTOP)
	case "cont":
		server.Signal(syscall.SIGCONT)
	default:
		ts.Fatalf("usage: pgserver restart|stop|cont")
	}
}
