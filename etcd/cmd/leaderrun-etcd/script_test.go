package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/etcd/etcdcmd"
	"github.com/leaderrun/leaderrun/etcd/internal/etcdtest"
)

// TestMain runs the test binary as leaderrun-etcd when a script execs it
// as leaderrun or leaderrun-etcd, and as a term's watchdog when cmd
// re-executes it (/proc/self/exe, argv[0] leaderrun-watchdog, which
// testscript would not know); otherwise it runs the tests, with one
// 3-member etcd cluster for all scripts, started on first use.
func TestMain(m *testing.M) {
	if os.Getenv("LEADERRUN_INTERNAL_ROLE") != "" {
		os.Exit(cmd.Main(etcdcmd.Options()...))
	}
	etcdMain := func() { os.Exit(cmd.Main(etcdcmd.Options()...)) }
	testscript.Main(withCleanup{m}, map[string]func(){"leaderrun": etcdMain, "leaderrun-etcd": etcdMain})
}

// withCleanup ends the shared cluster and removes the built binaries once
// the tests have run (testscript.Main exits the process itself).
type withCleanup struct{ m *testing.M }

func (w withCleanup) Run() int {
	code := w.m.Run()
	if cluster != nil {
		cluster.Close()
	}
	if binsDir != "" {
		os.RemoveAll(binsDir)
	}
	return code
}

var (
	clusterOnce sync.Once
	cluster     *etcdtest.Cluster
	clusterErr  error
	scriptSeq   atomic.Int64
)

// sharedCluster is the package's 3-member etcd: skipped without an etcd
// binary, a failure under CI=true (etcdtest.Require).
func sharedCluster(t *testing.T) *etcdtest.Cluster {
	t.Helper()
	etcdtest.Require(t)
	clusterOnce.Do(func() { cluster, clusterErr = etcdtest.Start(etcdtest.Options{Members: 3}) })
	if clusterErr != nil {
		t.Fatal(clusterErr)
	}
	return cluster
}

// TestScripts runs testdata/scripts/*.txtar against a 3-member etcd on
// loopback. Each script gets:
//
//   - $LEADERRUN_ETCD_ENDPOINTS, the cluster, and $LEADERRUN_ETCD_PREFIX,
//     a key prefix of its own;
//   - three simulated hosts: the lock directories $HA, $HB and $HC
//     ($WORK/hostA, hostB, hostC, mode 0700), which a command names with
//     --dir $HA --host A (and so on); $LEADERRUN_DIR=$HA and
//     $LEADERRUN_HOST=A are the defaults.
func TestScripts(t *testing.T) {
	c := sharedCluster(t)
	testscript.Run(t, scriptParams(c, "testdata/scripts"))
}

// TestBusScripts runs testdata/bus/*.txtar: publish, subscribe, --fanout
// and who --json across simulated hosts, over the bus in etcd
// (etcd/bus*.go).
func TestBusScripts(t *testing.T) {
	c := sharedCluster(t)
	testscript.Run(t, scriptParams(c, "testdata/bus"))
}

func scriptParams(c *etcdtest.Cluster, dir string) testscript.Params {
	endpoints := strings.Join(c.Endpoints(), ",")
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
			env.Setenv("LEADERRUN_ETCD_ENDPOINTS", endpoints)
			env.Setenv("LEADERRUN_ETCD_PREFIX", fmt.Sprintf("/lrts/%d-%d-%s/", os.Getpid(), scriptSeq.Add(1), filepath.Base(env.WorkDir)))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfile":   cmdWaitfile,
			"waitleader": cmdWaitleader,
			"waitqueue":  cmdWaitqueue,
			"sleep":      cmdSleep,
			"sigpid":     cmdSigpid,
			"gone":       cmdGone,
			"stopwatch":  cmdStopwatch,
			"buildbins":  cmdBuildbins,
		},
	}
}

// hardTimeout bounds every wait of the custom commands; -t overrides it.
const hardTimeout = 15 * time.Second

func timeoutArg(ts *testscript.TestScript, args []string) (time.Duration, []string) {
	if len(args) >= 2 && args[0] == "-t" {
		d, err := time.ParseDuration(args[1])
		ts.Check(err)
		return d, args[2:]
	}
	return hardTimeout, args
}

// poll calls ok until it reports true or d passes, then fails with what.
func poll(ts *testscript.TestScript, d time.Duration, what string, ok func() bool) {
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			ts.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitfile [-t DURATION] FILE [TEXT]: wait until FILE exists (and holds TEXT).
func cmdWaitfile(ts *testscript.TestScript, neg bool, args []string) {
	d, args := timeoutArg(ts, args)
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: waitfile [-t DURATION] FILE [TEXT]")
	}
	path := ts.MkAbs(args[0])
	poll(ts, d, strings.Join(args, " "), func() bool {
		b, err := os.ReadFile(path)
		return err == nil && (len(args) == 1 || bytes.Contains(b, []byte(args[1])))
	})
}

// leaderrun runs leaderrun-etcd (the test binary, on PATH) outside the
// script, for the readiness commands, as host C with the script's cluster
// and prefix.
func leaderrun(ts *testscript.TestScript, args ...string) ([]byte, error) {
	c := exec.Command("leaderrun", args...)
	c.Env = append(os.Environ(),
		"LEADERRUN_DIR="+ts.Getenv("HC"), "LEADERRUN_HOST=C",
		"LEADERRUN_ETCD_ENDPOINTS="+ts.Getenv("LEADERRUN_ETCD_ENDPOINTS"),
		"LEADERRUN_ETCD_PREFIX="+ts.Getenv("LEADERRUN_ETCD_PREFIX"))
	return c.Output()
}

// waitleader [-t DURATION] NAME: wait until somebody, on any host, leads
// NAME. ! waitleader NAME: wait until nobody does.
func cmdWaitleader(ts *testscript.TestScript, neg bool, args []string) {
	d, args := timeoutArg(ts, args)
	if len(args) != 1 {
		ts.Fatalf("usage: waitleader [-t DURATION] NAME")
	}
	what := "a leader of " + args[0]
	if neg {
		what = "no leader of " + args[0]
	}
	poll(ts, d, what, func() bool {
		_, err := leaderrun(ts, "who", args[0])
		return (err == nil) != neg
	})
}

// waitqueue [-t DURATION] NAME N: wait until N requests, from any host,
// wait in NAME's queue.
func cmdWaitqueue(ts *testscript.TestScript, neg bool, args []string) {
	d, args := timeoutArg(ts, args)
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitqueue [-t DURATION] NAME N")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	poll(ts, d, args[1]+" waiting for "+args[0], func() bool {
		out, err := leaderrun(ts, "status", args[0], "--json")
		var snap struct{ Pending []json.RawMessage }
		return err == nil && json.Unmarshal(out, &snap) == nil && len(snap.Pending) == n
	})
}

// sleep DURATION
func cmdSleep(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: sleep DURATION")
	}
	d, err := time.ParseDuration(args[0])
	ts.Check(err)
	time.Sleep(d)
}

func pidIn(ts *testscript.TestScript, file string) int {
	b, err := os.ReadFile(ts.MkAbs(file))
	ts.Check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	ts.Check(err)
	if pid < 2 {
		ts.Fatalf("%s holds pid %d: refusing to signal it", file, pid)
	}
	return pid
}

// sigpid SIGNAL FILE: send SIGNAL (TERM, KILL, STOP, CONT, ...) to the pid
// in FILE. A stopped process is continued when the script ends, so that a
// failing script fails instead of hanging on it.
func cmdSigpid(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: sigpid SIGNAL FILE")
	}
	sigs := map[string]syscall.Signal{"INT": syscall.SIGINT, "TERM": syscall.SIGTERM, "HUP": syscall.SIGHUP,
		"USR1": syscall.SIGUSR1, "KILL": syscall.SIGKILL, "STOP": syscall.SIGSTOP, "CONT": syscall.SIGCONT}
	sig, ok := sigs[args[0]]
	if !ok {
		ts.Fatalf("unknown signal %s", args[0])
	}
	pid := pidIn(ts, args[1])
	if sig == syscall.SIGSTOP {
		ts.Defer(func() { syscall.Kill(pid, syscall.SIGCONT) })
	}
	ts.Check(syscall.Kill(pid, sig))
}

// gone FILE: the process whose pid is in FILE no longer runs (gone or a
// zombie). ! gone FILE: it still runs.
func cmdGone(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: gone FILE")
	}
	pid := pidIn(ts, args[0])
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	dead := err != nil
	if err == nil {
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		dead = s[i+2] == 'Z' || s[i+2] == 'X'
	}
	if dead == neg {
		ts.Fatalf("process %d: gone=%v, want %v", pid, dead, !neg)
	}
}

// stopwatch start | stopwatch MIN MAX: the time since start lies in
// [MIN, MAX]. Only for bounds an order of magnitude apart from what would
// be wrong (a TTL waited out instead of a revoke), never for performance.
func cmdStopwatch(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: stopwatch start | stopwatch MIN MAX")
	}
	if args[0] == "start" {
		ts.Setenv("STOPWATCH", strconv.FormatInt(time.Now().UnixNano(), 10))
		return
	}
	start, err := strconv.ParseInt(ts.Getenv("STOPWATCH"), 10, 64)
	ts.Check(err)
	lo, err := time.ParseDuration(args[0])
	ts.Check(err)
	hi, err := time.ParseDuration(args[1])
	ts.Check(err)
	if el := time.Since(time.Unix(0, start)); el < lo || el > hi {
		ts.Fatalf("%s elapsed, want between %s and %s", el, lo, hi)
	}
}

var (
	binsOnce sync.Once
	binsDir  string
	binsErr  error
)

// buildbins: build the plain leaderrun (root module) and leaderrun-etcd
// once per run and set $BINS to a directory with both/ (leaderrun and
// leaderrun-etcd side by side), alone/ (leaderrun only) and etcdonly/
// (leaderrun-etcd only).
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
	dir, err := os.MkdirTemp("", "leaderrun-etcd-bins-")
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
	for _, sub := range []string{"both", "alone", "etcdonly"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			return dir, err
		}
	}
	if err := build(root, ".", filepath.Join(dir, "both", "leaderrun")); err != nil {
		return dir, err
	}
	if err := build(filepath.Join(root, "etcd"), "./cmd/leaderrun-etcd", filepath.Join(dir, "both", "leaderrun-etcd")); err != nil {
		return dir, err
	}
	for _, l := range [][2]string{{"both/leaderrun", "alone/leaderrun"}, {"both/leaderrun-etcd", "etcdonly/leaderrun-etcd"}} {
		if err := os.Link(filepath.Join(dir, l[0]), filepath.Join(dir, l[1])); err != nil {
			return dir, err
		}
	}
	return dir, nil
}
