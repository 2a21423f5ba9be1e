package etcd

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/etcd/internal/etcdtest"
)

// TestFaultNewSessionMemberStopped is the soak's 7s stall: when the raft
// leader stops for longer than TTL less margin, every session ends, and
// a waiter that queues again grants a new lease and creates a new
// request. Those requests were not bounded: one that the client sent to
// the stopped member (it keeps its connections and answers nothing)
// waited until it resumed. Here a follower is stopped for 20s, and a
// Locker whose client balances over it and a live member grants eight
// new sessions and takes the lock on each: every one must be done while
// the member is still stopped. Once it resumes, the name has no holder
// and no request left.
func TestFaultNewSessionMemberStopped(t *testing.T) {
	c := etcdtest.StartT(t, 3)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var stopped, live *etcdtest.Member
	for _, m := range c.Members {
		switch {
		case m == leader:
		case stopped == nil:
			stopped = m
		default:
			live = m
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{stopped.ClientURL, live.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	l := open(t, c, pfx, Config{TTL: 3 * time.Second, Client: cli})
	// Both connections up before the stop (a member stopped before the
	// client connects is never picked: its connection does not become
	// ready).
	for range 4 {
		if _, err := l.Query(ctx, "job"); err != nil {
			t.Fatal(err)
		}
	}
	const stopFor = 30 * time.Second
	stopped.Signal(syscall.SIGSTOP)
	defer stopped.Signal(syscall.SIGCONT)
	t0 := time.Now()
	for i := range 8 {
		l.mu.Lock()
		s := l.sess
		l.mu.Unlock()
		if s != nil {
			s.end(errors.New("test: a new session"), true)
		}
		actx, cancel := context.WithTimeout(ctx, stopFor)
		lead, err := l.Acquire(actx, "job", elect.Request{})
		cancel()
		if err != nil {
			t.Fatalf("acquire %d with member %s stopped, %v after the stop: %v", i, stopped.Name, time.Since(t0).Round(time.Millisecond), err)
		}
		if err := lead.Release(); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(t0); took >= stopFor {
		t.Fatalf("eight new sessions and grants took %v, as long as member %s was stopped: a request waited for it", took, stopped.Name)
	}
	t.Logf("eight new sessions and grants with member %s stopped took %v", stopped.Name, time.Since(t0).Round(time.Millisecond))
	// The member resumes and runs what was sent to it and given up: the
	// creating txns must do nothing (their fences are there), or they
	// would leave requests or grants on a live lease that nobody waits
	// for, and the name would be blocked while this process lives.
	stopped.Signal(syscall.SIGCONT)
	hctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := c.WaitHealthy(hctx); err != nil {
		t.Fatal(err)
	}
	// A read through the resumed member comes after what it had read
	// before it stopped.
	if _, err := c.ClientOf(t, stopped.ClientURL).Get(hctx, pfx); err != nil {
		t.Fatal(err)
	}
	snap, err := l.Query(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Held) != 0 || len(snap.Pending) != 0 {
		t.Fatalf("after member %s resumed, the name has holders %+v and requests %+v that nobody waits for", stopped.Name, snap.Held, snap.Pending)
	}
}

// TestLateCreateFenced: a creating txn given up (it timed out, sent to a
// stopped member) may run when that member resumes. It must then do
// nothing: the next request of the same Acquire wrote its fence. Here the
// late one is sent by hand after the request that abandoned it was
// granted; without the fence it would queue a request, on a live lease,
// that nobody waits for.
func TestLateCreateFenced(t *testing.T) {
	c := sharedCluster(t)
	ctx := testCtx(t)
	l := open(t, c, testPrefix(t), Config{})
	s, err := l.session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(abandoned []abandonedReq) *acquirer {
		a := &acquirer{l: l, s: s, name: "job", base: l.base("job"), abandoned: abandoned}
		a.id = l.nextID(s)
		a.key = requestKey(a.base, a.req, a.id)
		a.heldKey = a.base + dirHeld + a.id
		return a
	}
	late := mk(nil)
	next := mk([]abandonedReq{{id: late.id, key: late.key, heldKey: late.heldKey}})
	lead, err := next.run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Release()
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := late.run(lctx); !errors.Is(err, errFenced) {
		t.Fatalf("a creating txn abandoned before its successor's ran late and was not fenced: %v", err)
	}
	snap, err := l.Query(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Held) != 1 || len(snap.Pending) != 0 {
		t.Fatalf("after the late creating txn: holders %+v, requests %+v; want the one holder and no request", snap.Held, snap.Pending)
	}
}
