package bus

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/etcd"
	"github.com/leaderrun/leaderrun/etcd/internal/etcdtest"
	"github.com/leaderrun/leaderrun/etcd/internal/seam"
)

// TestMain runs the tests with one shared single-member etcd started on
// first use.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Close()
	}
	os.Exit(code)
}

var (
	sharedOnce sync.Once
	shared     *etcdtest.Cluster
	sharedErr  error
	prefixes   atomic.Int64
)

// sharedCluster is one etcd member for the tests that do not harm it.
func sharedCluster(t testing.TB) *etcdtest.Cluster {
	t.Helper()
	etcdtest.Require(t)
	sharedOnce.Do(func() { shared, sharedErr = etcdtest.Start(etcdtest.Options{Members: 1}) })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// testPrefix is a key prefix no other test uses.
func testPrefix(t testing.TB) string {
	n := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/lrtest/%s-%d/", n, prefixes.Add(1))
}

// open opens a Locker on c under prefix, closed when t ends.
func open(t testing.TB, c *etcdtest.Cluster, prefix string, cfg etcd.Config) *etcd.Locker {
	t.Helper()
	cfg.Endpoints = c.Endpoints()
	cfg.Prefix = prefix
	if cfg.TTL == 0 {
		cfg.TTL = 4 * time.Second
	}
	l, err := etcd.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type result struct {
	lead *elect.Leadership
	err  error
}

func async(ctx context.Context, l *etcd.Locker, name string, req elect.Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		lead, err := l.Acquire(ctx, name, req)
		ch <- result{lead, err}
	}()
	return ch
}

func answer(t *testing.T, ch <-chan result, d time.Duration, what string) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("%s: no answer within %v", what, d)
	}
	return result{}
}

// leaseOf is the lease of l's live session.
func leaseOf(t *testing.T, l *etcd.Locker) clientv3.LeaseID {
	t.Helper()
	s, err := seam.Of(l).Session(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return s.ID()
}

func waitKeys(t testing.TB, cli *clientv3.Client, pfx string, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := cli.Get(context.Background(), pfx, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && r.Count == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: want %d keys", pfx, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
