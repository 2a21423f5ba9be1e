package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leaderrun/leaderrun/etcd/etcdcmd"
	"github.com/leaderrun/leaderrun/etcd/internal/etcdtest"
	"github.com/leaderrun/leaderrun/internal/backendtest"
	"github.com/leaderrun/leaderrun/internal/scriptcmd"
)

// TestMain runs the test binary as leaderrun-etcd for the scripts
// (backendtest.Main); otherwise it runs the tests, with one 3-member etcd
// cluster for all scripts, started on first use.
func TestMain(m *testing.M) {
	backendtest.Main(m, "etcd", etcdcmd.Options(), shared.Close)
}

var (
	shared    backendtest.Shared[*etcdtest.Cluster]
	scriptSeq atomic.Int64
)

// sharedCluster is the package's 3-member etcd: skipped without an etcd
// binary, a failure under CI=true (etcdtest.Require).
func sharedCluster(t *testing.T) *etcdtest.Cluster {
	t.Helper()
	etcdtest.Require(t)
	return shared.Get(t, func() (*etcdtest.Cluster, error) { return etcdtest.Start(etcdtest.Options{Members: 3}) })
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
			if err := backendtest.Hosts(env); err != nil {
				return err
			}
			env.Setenv("LEADERRUN_ETCD_ENDPOINTS", endpoints)
			env.Setenv("LEADERRUN_ETCD_PREFIX", fmt.Sprintf("/lrts/%d-%d-%s/", os.Getpid(), scriptSeq.Add(1), filepath.Base(env.WorkDir)))
			return nil
		},
		Cmds: scriptCmds(),
	}
}

// scriptCmds are the shared commands (internal/backendtest) and etcdput.
func scriptCmds() map[string]scriptcmd.Cmd {
	cmds := backendtest.Commands("etcd", "LEADERRUN_ETCD_ENDPOINTS", "LEADERRUN_ETCD_PREFIX")
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
	ctx, cancel := context.WithTimeout(context.Background(), backendtest.HardTimeout)
	defer cancel()
	_, err = cli.Put(ctx, args[0], args[1])
	ts.Check(err)
}
