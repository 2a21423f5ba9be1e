package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/etcd/etcdcmd"
	"github.com/leaderrun/leaderrun/etcd/internal/etcdtest"
	"github.com/leaderrun/leaderrun/internal/scriptcmd"
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
		Cmds: scriptCmds(),
	}
}

// scriptCmds are the shared commands (internal/scriptcmd) and buildbins.
func scriptCmds() map[string]scriptcmd.Cmd {
	cmds := scriptcmd.Commands(leaderrun, hardTimeout)
	cmds["buildbins"] = cmdBuildbins
	cmds["etcdput"] = cmdEtcdput
	return cmds
}

// cmdEtcdput writes a key as another application would: etcdput KEY VALUE.
func cmdEtcdput(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: etcdput KEY VALUE")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(ts.Getenv("LEADERRUN_ETCD_ENDPOINTS"), ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	ts.Check(err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hardTimeout)
	defer cancel()
	_, err = cli.Put(ctx, args[0], args[1])
	ts.Check(err)
}

// hardTimeout bounds every wait of the custom commands; -t overrides it.
const hardTimeout = 15 * time.Second

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
