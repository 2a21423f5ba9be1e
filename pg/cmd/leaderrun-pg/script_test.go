package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/internal/scriptcmd"
	"github.com/leaderrun/leaderrun/pg/internal/pgtest"
	"github.com/leaderrun/leaderrun/pg/pgcmd"
)

// TestMain runs the test binary as leaderrun-pg when a script execs it as
// leaderrun or leaderrun-pg, and as a term's watchdog when cmd re-executes
// it (/proc/self/exe, argv[0] leaderrun-watchdog, which testscript would
// not know); otherwise it runs the tests, with one PostgreSQL server for
// all scripts, started on first use.
func TestMain(m *testing.M) {
	if os.Getenv("LEADERRUN_INTERNAL_ROLE") != "" {
		os.Exit(cmd.Main(pgcmd.Options()...))
	}
	pgMain := func() { os.Exit(cmd.Main(pgcmd.Options()...)) }
	testscript.Main(withCleanup{m}, map[string]func(){"leaderrun": pgMain, "leaderrun-pg": pgMain})
}

// withCleanup ends the shared server and removes the built binaries once
// the tests have run (testscript.Main exits the process itself).
type withCleanup struct{ m *testing.M }

func (w withCleanup) Run() int {
	code := w.m.Run()
	if server != nil {
		server.Close()
	}
	if binsDir != "" {
		os.RemoveAll(binsDir)
	}
	return code
}

var (
	serverOnce sync.Once
	server     *pgtest.Server
	serverErr  error
	scriptSeq  atomic.Int64
)

// sharedServer is the package's PostgreSQL: skipped without one, a
// failure under CI=true (pgtest.Require).
func sharedServer(t *testing.T) *pgtest.Server {
	t.Helper()
	pgtest.Require(t)
	serverOnce.Do(func() { server, serverErr = pgtest.Start() })
	if serverErr != nil {
		t.Fatal(serverErr)
	}
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
			for _, h := range []string{"A", "B", "C"} {
				d := filepath.Join(env.WorkDir, "host"+h)
				if err := os.Mkdir(d, 0o700); err != nil {
					return err
				}
				env.Setenv("H"+h, d)
			}
			env.Setenv("LEADERRUN_DIR", filepath.Join(env.WorkDir, "hostA"))
			env.Setenv("LEADERRUN_HOST", "A")
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

// scriptCmds are the shared commands (internal/scriptcmd) and buildbins.
func scriptCmds() map[string]scriptcmd.Cmd {
	cmds := scriptcmd.Commands(leaderrun, hardTimeout)
	cmds["buildbins"] = cmdBuildbins
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

// hardTimeout bounds every wait of the custom commands; -t overrides it.
const hardTimeout = 15 * time.Second

// leaderrun runs leaderrun-pg (the test binary, on PATH) outside the
// script, for the readiness commands, as host C with the script's server
// and schema.
func leaderrun(ts *testscript.TestScript, args ...string) ([]byte, error) {
	c := exec.Command("leaderrun", args...)
	c.Env = append(os.Environ(),
		"LEADERRUN_DIR="+ts.Getenv("HC"), "LEADERRUN_HOST=C",
		"LEADERRUN_PG_URL="+ts.Getenv("LEADERRUN_PG_URL"),
		"LEADERRUN_PG_SCHEMA="+ts.Getenv("LEADERRUN_PG_SCHEMA"))
	return c.Output()
}

var (
	binsOnce sync.Once
	binsDir  string
	binsErr  error
)

// buildbins: build the plain leaderrun (root module) and leaderrun-pg
// once per run and set $BINS to a directory with both/ (leaderrun and
// leaderrun-pg side by side), alone/ (leaderrun only) and pgonly/
// (leaderrun-pg only).
func cmdBuildbins(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: buildbins")
	}
	binsOnce.Do(func() { binsDir, binsErr = buildBins() })
	ts.Check(binsErr)
	ts.Setenv("BINS", binsDir)
}

func buildBins() (string, error) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("the root module is not at %s: %v", root, err)
	}
	dir, err := os.MkdirTemp("", "leaderrun-pg-bins-")
	if err != nil {
		return "", err
	}
	build := func(moduleDir, pkg, out string) error {
		c := exec.Command("go", "build", "-o", out, pkg)
		c.Dir = moduleDir
		if b, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
		}
		return nil
	}
	for _, sub := range []string{"both", "alone", "pgonly"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			return dir, err
		}
	}
	if err := build(root, ".", filepath.Join(dir, "both", "leaderrun")); err != nil {
		return dir, err
	}
	if err := build(filepath.Join(root, "pg"), "./cmd/leaderrun-pg", filepath.Join(dir, "both", "leaderrun-pg")); err != nil {
		return dir, err
	}
	for _, l := range [][2]string{{"both/leaderrun", "alone/leaderrun"}, {"both/leaderrun-pg", "pgonly/leaderrun-pg"}} {
		if err := os.Link(filepath.Join(dir, l[0]), filepath.Join(dir, l[1])); err != nil {
			return dir, err
		}
	}
	return dir, nil
}
