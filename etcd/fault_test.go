package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/etcd/internal/etcdtest"
)

// TestFaultLeaderMemberKilled: in a 3-member cluster the raft leader is
// SIGKILLed while one Locker holds and another waits. The term survives
// (its lease is renewed by the new leader), the queue keeps its order,
// and after the member's restart the waiter is granted on release. Then
// the holder's process is SIGKILLed and the lock passes within the TTL.
func TestFaultLeaderMemberKilled(t *testing.T) {
	c := etcdtest.StartT(t, 3)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	const ttl = 6 * time.Second
	a := open(t, c, pfx, Config{TTL: ttl, Host: "a"})
	b := open(t, c, pfx, Config{TTL: ttl, Host: "b"})
	h, err := a.Acquire(ctx, "job", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	w := async(ctx, b, "job", elect.Request{})
	queuedN(t, b, "job", 1)
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	leader.Kill()
	hctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := c.WaitHealthy(hctx); err != nil {
		t.Fatal(err)
	}
	// A renewal sent after the kill was acknowledged: the lease lives on.
	s, err := a.session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * ttl)
	for !s.At().After(killed.Add(ttl - a.margin)) {
		if h.Err() != nil {
			t.Fatalf("the term ended with the etcd leader: %v", h.Err())
		}
		if time.Now().After(deadline) {
			t.Fatal("no renewal acknowledged after the leader was killed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(hctx); err != nil {
		t.Fatal(err)
	}
	snap, err := a.Query(ctx, "job")
	if err != nil || len(snap.Held) != 1 || snap.Held[0].Epoch != h.Epoch() || len(snap.Pending) != 1 || snap.Pending[0].Host != "b" {
		t.Fatalf("after the leader's restart: %+v %v", snap, err)
	}
	if h.Err() != nil {
		t.Fatalf("term ended: %v", h.Err())
	}
	h.Release()
	r := answer(t, w, 20*time.Second, "waiter")
	if r.err != nil || r.lead.Epoch() <= h.Epoch() {
		t.Fatalf("waiter: %v", r.err)
	}
	last := r.lead.Epoch()
	// Crash failover: a holder process is SIGKILLed; its lease expires.
	p := spawnHolder(t, c.Endpoints(), pfx, "crash", 2*time.Second)
	p.expect("leader", 20*time.Second)
	w = async(ctx, b, "crash", elect.Request{})
	queuedN(t, b, "crash", 1)
	p.kill()
	r = answer(t, w, 20*time.Second, "waiter after the holder crashed")
	if r.err != nil || r.lead.Epoch() <= last {
		t.Fatalf("waiter after a crash: %v", r.err)
	}
	r.lead.Release()
}

// TestFaultNoQuorum: 2 of 3 members stopped. The holder's term ends from
// its own deadline within the TTL, and nobody is granted: the waiter's
// session cannot be renewed either. After the members continue, the lock
// is granted again with a higher epoch.
func TestFaultNoQuorum(t *testing.T) {
	c := etcdtest.StartT(t, 3)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	const ttl = 3 * time.Second
	a := open(t, c, pfx, Config{TTL: ttl})
	b := open(t, c, pfx, Config{TTL: ttl})
	h, err := a.Acquire(ctx, "job", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	w := async(ctx, b, "job", elect.Request{})
	queuedN(t, b, "job", 1)
	stopped := time.Now()
	c.Members[0].Signal(syscall.SIGSTOP)
	c.Members[1].Signal(syscall.SIGSTOP)
	defer c.Members[0].Signal(syscall.SIGCONT)
	defer c.Members[1].Signal(syscall.SIGCONT)
	select {
	case <-h.Done():
	case <-time.After(3 * ttl):
		t.Fatalf("the holder's term lasts %v without quorum", 3*ttl)
	}
	took := time.Since(stopped)
	if !errors.Is(h.Err(), elect.ErrSessionLost) {
		t.Fatalf("term ended with %v, want ErrSessionLost", h.Err())
	}
	// The deadline is the last acknowledged renewal's send time + TTL -
	// margin: before the server could expire the lease. Scheduling can
	// only add a little.
	if took > ttl {
		t.Errorf("term ended %v after quorum was lost; the lease may have expired at %v", took, ttl)
	}
	t.Logf("term ended %v after quorum was lost (TTL %v)", took, ttl)
	r := answer(t, w, 3*ttl, "waiter without quorum")
	if r.err == nil {
		r.lead.Release()
		t.Fatal("a waiter was granted without quorum")
	}
	if !errors.Is(r.err, elect.ErrSessionLost) {
		t.Fatalf("waiter without quorum: %v, want ErrSessionLost", r.err)
	}
	c.Members[0].Signal(syscall.SIGCONT)
	c.Members[1].Signal(syscall.SIGCONT)
	hctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := c.WaitHealthy(hctx); err != nil {
		t.Fatal(err)
	}
	l, err := b.Acquire(hctx, "job", elect.Request{})
	if err != nil {
		t.Fatalf("after quorum is back: %v", err)
	}
	if l.Epoch() <= h.Epoch() {
		t.Fatalf("epoch %d after %d", l.Epoch(), h.Epoch())
	}
	l.Release()
}

// fence is a resource that refuses writes with an epoch lower than one it
// has accepted: what every multi-host leader must write to.
type fence struct {
	max      uint64
	accepted []uint64
}

func (f *fence) write(epoch uint64) bool {
	if epoch < f.max {
		return false
	}
	f.max = epoch
	f.accepted = append(f.accepted, epoch)
	return true
}

// TestFaultStoppedHolderFencing: a holder process SIGSTOPped beyond its
// TTL loses the lock to a waiter with a higher epoch; once continued, it
// may still write before it learns of the loss, and the fence refuses
// those writes. It learns promptly, with ErrSessionLost.
func TestFaultStoppedHolderFencing(t *testing.T) {
	c := sharedCluster(t)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	const ttl = 2 * time.Second
	p := spawnHolder(t, c.Endpoints(), pfx, "job", ttl)
	old, _ := strconv.ParseUint(strings.Fields(p.expect("leader", 20*time.Second))[1], 10, 64)
	var f fence
	b := open(t, c, pfx, Config{TTL: ttl})
	w := async(ctx, b, "job", elect.Request{})
	queuedN(t, b, "job", 1)
	// Writes of the old holder before the stop are accepted.
	for got := 0; got < 3; {
		l := <-p.lines
		if strings.HasPrefix(l.text, "write") {
			if !f.write(old) {
				t.Fatal("fence refused the holder")
			}
			got++
		}
	}
	p.signal(syscall.SIGSTOP)
	r := answer(t, w, 10*ttl, "waiter behind a stopped holder")
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.lead.Release()
	if r.lead.Epoch() <= old {
		t.Fatalf("new epoch %d after %d", r.lead.Epoch(), old)
	}
	if !f.write(r.lead.Epoch()) {
		t.Fatal("fence refused the new holder")
	}
	p.signal(syscall.SIGCONT) // at once: nothing to wait for, the fence decides
	refused := 0
	timeout := time.After(10 * time.Second)
	for done := false; !done; {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatal("the old holder exited")
			}
			switch {
			case strings.HasPrefix(l.text, "write"):
				e, _ := strconv.ParseUint(strings.Fields(l.text)[1], 10, 64)
				if f.write(e) {
					t.Fatalf("fence accepted epoch %d after %d", e, r.lead.Epoch())
				}
				refused++
			case strings.HasPrefix(l.text, "lost"):
				if !strings.Contains(l.text, elect.ErrSessionLost.Error()) {
					t.Fatalf("old holder: %s", l.text)
				}
				done = true
			default:
				t.Fatalf("old holder said %q", l.text)
			}
		case <-timeout:
			t.Fatal("the continued holder did not learn of its loss within 10s")
		}
	}
	t.Logf("the fence refused %d late writes of the stopped holder", refused)
	for i := 1; i < len(f.accepted); i++ {
		if f.accepted[i] < f.accepted[i-1] {
			t.Fatalf("fence accepted %v", f.accepted)
		}
	}
	if r.lead.Err() != nil {
		t.Fatalf("the new term ended: %v", r.lead.Err())
	}
}

// TestFaultCompactionAndRestart: the only member is SIGKILLed and
// restarted after the history the watches started from was compacted.
// The holder's and the waiter's watches resume on compacted revisions; both
// read again and go on: a steal still deposes the holder, and the waiter
// is granted in turn.
func TestFaultCompactionAndRestart(t *testing.T) {
	c := etcdtest.StartT(t, 1)
	cli := c.Client(t)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	const ttl = 6 * time.Second
	a := open(t, c, pfx, Config{TTL: ttl})
	b := open(t, c, pfx, Config{TTL: ttl})
	thief := open(t, c, pfx, Config{TTL: ttl})
	h, err := a.Acquire(ctx, "job", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	w := async(ctx, b, "job", elect.Request{})
	queuedN(t, b, "job", 1)
	var rev int64
	for i := range 20 {
		r, err := cli.Put(ctx, fmt.Sprintf("/elsewhere/%d", i), "x")
		if err != nil {
			t.Fatal(err)
		}
		rev = r.Header.Revision
	}
	if _, err := cli.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	m := c.Members[0]
	m.Kill()
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	hctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := c.WaitHealthy(hctx); err != nil {
		t.Fatal(err)
	}
	st := async(ctx, thief, "job", elect.Request{Steal: true})
	select {
	case <-h.Done():
		if !errors.Is(h.Err(), elect.ErrStolen) {
			t.Fatalf("holder: %v", h.Err())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the holder did not learn of the steal after compaction and restart")
	}
	h.Release()
	r := answer(t, st, 20*time.Second, "steal")
	if r.err != nil {
		t.Fatal(r.err)
	}
	select {
	case r := <-w:
		t.Fatalf("the waiter answered (%v) before the stealer released", r.err)
	default:
	}
	r.lead.Release()
	rw := answer(t, w, 20*time.Second, "waiter")
	if rw.err != nil || rw.lead.Epoch() <= r.lead.Epoch() {
		t.Fatalf("waiter: %v", rw.err)
	}
	rw.lead.Release()
}

// TestFaultServerStopped: the only etcd member is SIGSTOPped (a frozen
// VM, a stalled disk). Nothing answers, nothing fails: the holder's term
// ends from its own deadline within the TTL all the same.
func TestFaultServerStopped(t *testing.T) {
	c := etcdtest.StartT(t, 1)
	ctx := testCtx(t)
	const ttl = 2 * time.Second
	l := open(t, c, testPrefix(t), Config{TTL: ttl})
	h, err := l.Acquire(ctx, "job", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	stopped := time.Now()
	c.Members[0].Signal(syscall.SIGSTOP)
	defer c.Members[0].Signal(syscall.SIGCONT)
	select {
	case <-h.Done():
	case <-time.After(3 * ttl):
		t.Fatalf("the term lasts %v with the server stopped", 3*ttl)
	}
	if took := time.Since(stopped); took > ttl || !errors.Is(h.Err(), elect.ErrSessionLost) {
		t.Fatalf("term ended after %v with %v; want ErrSessionLost within %v", took, h.Err(), ttl)
	}
	c.Members[0].Signal(syscall.SIGCONT)
	l2, err := l.Acquire(ctx, "job", elect.Request{})
	if err != nil {
		t.Fatalf("after the server continued: %v", err)
	}
	if l2.Epoch() <= h.Epoch() {
		t.Fatalf("epoch %d after %d", l2.Epoch(), h.Epoch())
	}
	l2.Release()
}
