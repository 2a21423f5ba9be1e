//go:build linux

package etcdcmd_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

// TestMain runs the election role when BenchmarkCLIFailover re-executes
// the test binary as its concurrency.Election peer, else the tests.
func TestMain(m *testing.M) {
	if os.Getenv(proctest.RoleEnv) == "election" {
		os.Exit(electionRole())
	}
	os.Exit(m.Run())
}

// electionRole is the peer wrapper: it campaigns with concurrency.Election
// on a session of LEADERRUN_BENCH_TTL seconds under LEADERRUN_BENCH_PREFIX
// and, once elected, runs sh -c LEADERRUN_BENCH_COMMAND, as a wrapper
// around etcd's own recipe would.
func electionRole() int {
	ttl, _ := strconv.Atoi(os.Getenv("LEADERRUN_BENCH_TTL"))
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(os.Getenv("LEADERRUN_BENCH_ENDPOINTS"), ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 69
	}
	defer cli.Close()
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttl))
	if err != nil {
		return 69
	}
	defer s.Close()
	if err := concurrency.NewElection(s, os.Getenv("LEADERRUN_BENCH_PREFIX")).Campaign(context.Background(), "x"); err != nil {
		return 69
	}
	cmd := exec.Command("sh", "-c", os.Getenv("LEADERRUN_BENCH_COMMAND"))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return 1
	}
	return 0
}
