package etcd

import (
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/etcd/internal/etcdtest"
)

// TestFaultWatchMemberStopped is the soak's first overlap without the
// overlap: the member that serves a waiter's watch is stopped (SIGSTOP: it
// keeps its connections and sends nothing), the holder, on another member,
// hands the lock on, and the waiter, whose other requests reach a live
// member, must take it up while that member is still stopped (its watch
// asks for progress, gets none, and is started again elsewhere), not when
// the member resumes. Before, it waited until the member came back.
func TestFaultWatchMemberStopped(t *testing.T) {
	c := etcdtest.StartT(t, 3)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	const ttl = 6 * time.Second
	client := func(ms ...*etcdtest.Member) *clientv3.Client {
		var eps []string
		for _, m := range ms {
			eps = append(eps, m.ClientURL)
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return cli
	}
	// Member ids, to tell which one answers a watch.
	ids := map[uint64]*etcdtest.Member{}
	for _, m := range c.Members {
		st, err := client(m).Status(ctx, m.ClientURL)
		if err != nil {
			t.Fatal(err)
		}
		ids[st.Header.MemberId] = m
	}
	a := open(t, c, pfx, Config{TTL: ttl, Client: client(c.Members[2])})
	b := open(t, c, pfx, Config{TTL: ttl, Client: client(c.Members[0], c.Members[1])})
	h, err := a.Acquire(ctx, "job", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var serving *etcdtest.Member
	testHookWatchResponse = func(w *liveWatch, wr clientv3.WatchResponse) bool {
		if w.l == b && wr.Created {
			mu.Lock()
			if serving == nil {
				serving = ids[wr.Header.MemberId]
			}
			mu.Unlock()
		}
		return true
	}
	defer func() { testHookWatchResponse = nil }()
	wb := async(ctx, b, "job", elect.Request{})
	queuedN(t, a, "job", 1)
	var stopped *etcdtest.Member
	for deadline := time.Now().Add(10 * time.Second); stopped == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		stopped = serving
		mu.Unlock()
	}
	if stopped == nil {
		t.Fatal("the waiter's watch was not created")
	}
	stopped.Signal(syscall.SIGSTOP)
	defer stopped.Signal(syscall.SIGCONT)
	const stopFor = 20 * time.Second
	resumed := time.AfterFunc(stopFor, func() { stopped.Signal(syscall.SIGCONT) })
	defer resumed.Stop()
	t0 := time.Now()
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	r := answer(t, wb, stopFor+10*time.Second, "the waiter whose watch's member is stopped")
	took := time.Since(t0)
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.lead.Release()
	if took >= stopFor {
		t.Fatalf("the waiter took the lock %v after the release, once the stopped member %s had resumed (after %v): its watch lagged silently", took, stopped.Name, stopFor)
	}
	t.Logf("member %s (serving the waiter's watch) stopped; the waiter took the lock %v after the release", stopped.Name, took.Round(time.Millisecond))
}
