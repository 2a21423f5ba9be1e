package bus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	lrbus "github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/etcd"
	"github.com/leaderrun/leaderrun/etcd/internal/etcdtest"
	"github.com/leaderrun/leaderrun/etcd/internal/seam"
)

// serveBus serves lead's bus until the test ends or the returned stop is
// called; stop returns Serve's error.
func serveBus(t testing.TB, l *etcd.Locker, lead *elect.Leadership, opts ...Option) (*Server, func() error) {
	t.Helper()
	srv, err := Listen(l, lead, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	var once sync.Once
	var serr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case serr = <-done:
			case <-time.After(20 * time.Second):
				serr = errors.New("Serve did not return within 20s")
			}
		})
		return serr
	}
	t.Cleanup(func() { stop() })
	return srv, stop
}

// acquire takes name on l for an exclusive term, failing the test if it
// cannot.
func acquire(t testing.TB, ctx context.Context, l *etcd.Locker, name string) *elect.Leadership {
	t.Helper()
	lead, err := l.Acquire(ctx, name, elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	return lead
}

func dial(t testing.TB, l *etcd.Locker, name string, o DialOptions) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := Dial(ctx, l, name, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func nextEvent(t testing.TB, cl *Client, what string) lrbus.Event {
	t.Helper()
	select {
	case ev, ok := <-cl.Events():
		if !ok {
			t.Fatalf("%s: Events closed", what)
		}
		return ev
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no event within 20s", what)
	}
	return lrbus.Event{}
}

func wantKind(t testing.TB, ev lrbus.Event, k lrbus.EventKind, what string) {
	t.Helper()
	if ev.Kind != k {
		t.Fatalf("%s: got %v event %+v, want %v", what, ev.Kind, ev, k)
	}
}

// noEvent checks that nothing arrives for d.
func noEvent(t testing.TB, cl *Client, d time.Duration, what string) {
	t.Helper()
	select {
	case ev := <-cl.Events():
		t.Fatalf("%s: unexpected event %v %+v", what, ev.Kind, ev)
	case <-time.After(d):
	}
}

// pauseWatch cuts cl's watch and keeps it from watching again until
// resume, as a lost connection would.
func pauseWatch(cl *Client) (resume func()) {
	hold := make(chan struct{})
	cl.mu.Lock()
	cl.hold = hold
	cl.mu.Unlock()
	cl.cutWatch()
	return func() {
		cl.mu.Lock()
		cl.hold = nil
		cl.mu.Unlock()
		close(hold)
	}
}

func TestBusLeaderEvent(t *testing.T) {
	c := sharedCluster(t)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	a := open(t, c, pfx, etcd.Config{Host: "host-a"})
	b := open(t, c, pfx, etcd.Config{Host: "host-b"})

	lead := acquire(t, ctx, a, "job")
	serveBus(t, a, lead)
	cl := dial(t, b, "job", DialOptions{})
	ev := nextEvent(t, cl, "first event")
	wantKind(t, ev, lrbus.EventLeader, "first event")
	got := ev.Leader
	if got.Name != "job" || got.PID != os.Getpid() || got.Host != "host-a" || got.Epoch != lead.Epoch() ||
		got.Mode != elect.Exclusive || !got.Since.Equal(lead.Since()) {
		t.Fatalf("leader %+v, want job pid %d host-a epoch %d exclusive since %v", got, os.Getpid(), lead.Epoch(), lead.Since())
	}
	if l, ok := cl.Leader(); !ok || l != got {
		t.Fatalf("Leader() = %+v %v, want %+v", l, ok, got)
	}
}

// TestBusOrder: three members, each on its own etcd member of a 3-member
// cluster, and the leader publish at once; every member receives every
// message, its own included, with the same seq from 1 and no gap.
func TestBusOrder(t *testing.T) {
	etcdtest.Require(t)
	c := etcdtest.StartT(t, 3)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	openAt := func(ep, host string) *etcd.Locker {
		l, err := etcd.Open(etcd.Config{Endpoints: []string{ep}, Prefix: pfx, TTL: 4 * time.Second, Host: host})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	leader := openAt(c.Members[0].ClientURL, "leader")
	lead := acquire(t, ctx, leader, "job")
	srv, _ := serveBus(t, leader, lead)
	const fromLeader, fromEach = 30, 10
	var members []*Client
	for i, m := range c.Members {
		cl := dial(t, openAt(m.ClientURL, fmt.Sprintf("m%d", i)), "job", DialOptions{})
		wantKind(t, nextEvent(t, cl, "first"), lrbus.EventLeader, "first")
		members = append(members, cl)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range fromLeader {
			if _, err := srv.Publish(fmt.Appendf(nil, "leader-%d", i)); err != nil {
				t.Error(err)
			}
		}
	})
	for i, cl := range members {
		wg.Go(func() {
			for j := range fromEach {
				if err := cl.Publish(ctx, fmt.Appendf(nil, "m%d-%d", i, j)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	total := fromLeader + fromEach*len(members)
	got := make([][]string, len(members))
	for i, cl := range members {
		for n := 1; n <= total; n++ {
			ev := nextEvent(t, cl, fmt.Sprintf("member %d message %d", i, n))
			wantKind(t, ev, lrbus.EventMessage, "message")
			if m := ev.Message; m.Seq != uint64(n) || m.Epoch != lead.Epoch() || ev.Gap || m.PID != os.Getpid() {
				t.Fatalf("member %d: message %d is %+v gap %v; want seq %d epoch %d, no gap", i, n, m, ev.Gap, n, lead.Epoch())
			}
			got[i] = append(got[i], string(ev.Message.Data))
		}
	}
	wg.Wait()
	for i := range members {
		if strings.Join(got[i], " ") != strings.Join(got[0], " ") {
			t.Fatalf("member %d received\n%v\nmember 0\n%v", i, got[i], got[0])
		}
	}
	// Each publisher's messages keep their order, and every member's own
	// publications are among them.
	next := map[string]int{}
	for _, d := range got[0] {
		who, n, _ := strings.Cut(d, "-")
		if fmt.Sprint(next[who]) != n {
			t.Fatalf("%s came out of order in %v", d, got[0])
		}
		next[who]++
	}
	for i := range members {
		if next[fmt.Sprintf("m%d", i)] != fromEach {
			t.Fatalf("member %d's own publications: %d of %d delivered", i, next[fmt.Sprintf("m%d", i)], fromEach)
		}
	}
	if next["leader"] != fromLeader {
		t.Fatalf("leader's: %d of %d", next["leader"], fromLeader)
	}
}

// TestBusLeaderChange: a release, a steal and a revoked lease each end
// the term with EventLost, and the next leader comes with its epoch.
func TestBusLeaderChange(t *testing.T) {
	c := sharedCluster(t)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	a := open(t, c, pfx, etcd.Config{Host: "host-a"})
	b := open(t, c, pfx, etcd.Config{Host: "host-b"})
	m := open(t, c, pfx, etcd.Config{Host: "host-m"})

	lead1 := acquire(t, ctx, a, "job")
	srv1, stop1 := serveBus(t, a, lead1)
	cl := dial(t, m, "job", DialOptions{})
	wantKind(t, nextEvent(t, cl, "first"), lrbus.EventLeader, "first")
	if _, err := srv1.PublishWait(ctx, []byte("one")); err != nil {
		t.Fatal(err)
	}
	wantKind(t, nextEvent(t, cl, "message"), lrbus.EventMessage, "message")

	// A release, as the CLI does it: stop serving, then release.
	next := async(ctx, b, "job", elect.Request{})
	if err := stop1(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve: %v", err)
	}
	ev := nextEvent(t, cl, "after stop")
	wantKind(t, ev, lrbus.EventLost, "after stop")
	if ev.Leader.Epoch != lead1.Epoch() || !errors.Is(ev.Err, lrbus.ErrLeaderGone) {
		t.Fatalf("lost %+v, want epoch %d, ErrLeaderGone", ev, lead1.Epoch())
	}
	if _, ok := cl.Leader(); ok {
		t.Fatal("Leader() reports a leader after EventLost")
	}
	lead1.Release()
	r := answer(t, next, 20*time.Second, "b's grant")
	if r.err != nil {
		t.Fatal(r.err)
	}
	lead2 := r.lead
	srv2, _ := serveBus(t, b, lead2)
	ev = nextEvent(t, cl, "second leader")
	wantKind(t, ev, lrbus.EventLeader, "second leader")
	if ev.Leader.Epoch != lead2.Epoch() || ev.Leader.Epoch <= lead1.Epoch() || ev.Leader.Host != "host-b" || ev.Gap {
		t.Fatalf("second leader %+v gap %v; want epoch %d > %d on host-b, no gap", ev.Leader, ev.Gap, lead2.Epoch(), lead1.Epoch())
	}
	if seq, err := srv2.PublishWait(ctx, []byte("two")); err != nil || seq != 1 {
		t.Fatalf("first message of the new term: seq %d, %v; want 1", seq, err)
	}
	ev = nextEvent(t, cl, "new term's message")
	if ev.Kind != lrbus.EventMessage || ev.Message.Seq != 1 || ev.Message.Epoch != lead2.Epoch() || ev.Gap {
		t.Fatalf("new term's message %+v", ev)
	}

	// A steal ends the term at once, before its holder lets go.
	d := open(t, c, pfx, etcd.Config{Host: "host-d"})
	steal := async(ctx, d, "job", elect.Request{Steal: true})
	ev = nextEvent(t, cl, "after steal")
	wantKind(t, ev, lrbus.EventLost, "after steal")
	if ev.Leader.Epoch != lead2.Epoch() {
		t.Fatalf("steal: lost %+v, want epoch %d", ev.Leader, lead2.Epoch())
	}
	<-lead2.Done()
	lead2.Release()
	r = answer(t, steal, 20*time.Second, "steal")
	if r.err != nil {
		t.Fatal(r.err)
	}
	lead3 := r.lead
	serveBus(t, d, lead3)
	ev = nextEvent(t, cl, "stealer")
	wantKind(t, ev, lrbus.EventLeader, "stealer")
	if ev.Leader.Epoch != lead3.Epoch() || ev.Leader.Host != "host-d" {
		t.Fatalf("stealer %+v", ev.Leader)
	}

	// The holder's lease goes (revoked, as an expiry would).
	id := leaseOf(t, d)
	if _, err := c.Client(t).Revoke(ctx, id); err != nil {
		t.Fatal(err)
	}
	ev = nextEvent(t, cl, "after revoke")
	wantKind(t, ev, lrbus.EventLost, "after revoke")
	if ev.Leader.Epoch != lead3.Epoch() {
		t.Fatalf("revoke: lost %+v", ev.Leader)
	}
	noEvent(t, cl, 300*time.Millisecond, "after revoke")
}

// TestBusGap: a member whose watch is cut resumes from where it was and
// loses nothing; when etcd has compacted that history meanwhile, the next
// message comes with Gap, and a term that began meanwhile with Gap on its
// EventLeader.
func TestBusGap(t *testing.T) {
	c := sharedCluster(t)
	cli := c.Client(t)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	a := open(t, c, pfx, etcd.Config{})
	m := open(t, c, pfx, etcd.Config{})
	lead := acquire(t, ctx, a, "job")
	srv, stop := serveBus(t, a, lead)
	cl := dial(t, m, "job", DialOptions{})
	wantKind(t, nextEvent(t, cl, "first"), lrbus.EventLeader, "first")
	publish := func(s string) {
		t.Helper()
		if _, err := srv.PublishWait(ctx, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	want := func(seq uint64, gap bool) {
		t.Helper()
		ev := nextEvent(t, cl, fmt.Sprint("seq ", seq))
		if ev.Kind != lrbus.EventMessage || ev.Message.Seq != seq || ev.Gap != gap {
			t.Fatalf("got %v %+v gap %v; want message seq %d gap %v", ev.Kind, ev.Message, ev.Gap, seq, gap)
		}
	}
	compact := func() {
		t.Helper()
		r, err := cli.Get(ctx, "compact-probe")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Compact(ctx, r.Header.Revision); err != nil {
			t.Fatal(err)
		}
	}
	publish("1")
	want(1, false)

	// Cut without compaction: the watch resumes from its revision.
	resume := pauseWatch(cl)
	publish("2")
	publish("3")
	resume()
	want(2, false)
	want(3, false)

	// Cut, and the history compacted: 4 and 5 are lost.
	resume = pauseWatch(cl)
	publish("4")
	publish("5")
	compact()
	resume()
	waitFor(t, func() bool { cl.mu.Lock(); defer cl.mu.Unlock(); return cl.lastSeq == 5 }, "the member to read the present again")
	publish("6")
	want(6, true)
	publish("7")
	want(7, false)

	// Cut while the term ends and the next one publishes.
	resume = pauseWatch(cl)
	next := async(ctx, m, "job", elect.Request{})
	stop()
	lead.Release()
	r := answer(t, next, 20*time.Second, "next grant")
	if r.err != nil {
		t.Fatal(r.err)
	}
	srv2, _ := serveBus(t, m, r.lead)
	if _, err := srv2.PublishWait(ctx, []byte("x1")); err != nil {
		t.Fatal(err)
	}
	compact()
	resume()
	ev := nextEvent(t, cl, "lost")
	wantKind(t, ev, lrbus.EventLost, "lost")
	ev = nextEvent(t, cl, "new leader")
	wantKind(t, ev, lrbus.EventLeader, "new leader")
	if ev.Leader.Epoch != r.lead.Epoch() || !ev.Gap {
		t.Fatalf("new leader %+v gap %v; want epoch %d with Gap", ev.Leader, ev.Gap, r.lead.Epoch())
	}
	if _, err := srv2.PublishWait(ctx, []byte("x2")); err != nil {
		t.Fatal(err)
	}
	want(2, false)
}

// TestBusSlowMember: a member that leaves more than EventBuffer messages
// unread loses the excess and sees Gap on the next.
func TestBusSlowMember(t *testing.T) {
	c := sharedCluster(t)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	a := open(t, c, pfx, etcd.Config{})
	lead := acquire(t, ctx, a, "job")
	srv, _ := serveBus(t, a, lead)
	cl := dial(t, a, "job", DialOptions{EventBuffer: 3})
	wantKind(t, nextEvent(t, cl, "first"), lrbus.EventLeader, "first")
	for i := range 6 {
		if _, err := srv.PublishWait(ctx, fmt.Append(nil, i)); err != nil {
			t.Fatal(err)
		}
	}
	// Let every event reach the client: 1 waits in the hand-off to
	// Events, 2..4 in the buffer, and 5 and 6 are dropped.
	time.Sleep(300 * time.Millisecond)
	var seqs []uint64
	var prev uint64
	gaps := 0
	deadline := time.After(20 * time.Second)
	for prev < 7 {
		select {
		case ev := <-cl.Events():
			seq := ev.Message.Seq
			if seq != prev+1 && !ev.Gap {
				t.Fatalf("seq %d after %v without Gap", seq, seqs)
			}
			if ev.Gap {
				gaps++
			}
			seqs = append(seqs, seq)
			prev = seq
		case <-time.After(200 * time.Millisecond):
			if _, err := srv.PublishWait(ctx, []byte("7")); err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatalf("got %v", seqs)
		}
	}
	if gaps == 0 || len(seqs) >= 7 {
		t.Fatalf("with EventBuffer 3 and 6 unread: delivered %v with %d gaps; want some dropped and a gap", seqs, gaps)
	}
}

func TestBusNoLeader(t *testing.T) {
	c := sharedCluster(t)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	a := open(t, c, pfx, etcd.Config{})
	b := open(t, c, pfx, etcd.Config{})

	if _, err := Dial(ctx, b, "job", DialOptions{}); !errors.Is(err, lrbus.ErrNoLeader) {
		t.Fatalf("Dial with nobody holding: %v, want ErrNoLeader", err)
	}
	// A holder that does not serve is no leader of the lrbus.
	lead := acquire(t, ctx, a, "job")
	if _, err := Dial(ctx, b, "job", DialOptions{}); !errors.Is(err, lrbus.ErrNoLeader) {
		t.Fatalf("Dial with a holder not serving: %v, want ErrNoLeader", err)
	}
	if _, err := Listen(b, lead); !errors.Is(err, elect.ErrInvalidRequest) {
		t.Fatalf("Listen of another Locker's leadership: %v", err)
	}
	dialed := make(chan error, 1)
	var wcl *Client
	go func() {
		var err error
		wcl, err = Dial(ctx, b, "job", DialOptions{WaitForLeader: true})
		dialed <- err
	}()
	select {
	case err := <-dialed:
		t.Fatalf("Dial with WaitForLeader returned %v before anyone served", err)
	case <-time.After(300 * time.Millisecond):
	}
	_, stop := serveBus(t, a, lead)
	if err := <-dialed; err != nil {
		t.Fatal(err)
	}
	defer wcl.Close()
	wantKind(t, nextEvent(t, wcl, "first"), lrbus.EventLeader, "first")
	if _, err := Listen(a, lead); err == nil {
		t.Fatal("a second Listen of one term succeeded")
	}

	// Between leaders: ErrNoLeader, or a wait.
	cl := dial(t, b, "job", DialOptions{PublishOnly: true})
	stop()
	lead.Release()
	waitFor(t, func() bool { _, ok := cl.Leader(); return !ok }, "the client to see the term end")
	if err := cl.Publish(ctx, []byte("x")); !errors.Is(err, lrbus.ErrNoLeader) {
		t.Fatalf("Publish between leaders: %v, want ErrNoLeader", err)
	}
	if _, err := cl.Request(ctx, []byte("x")); !errors.Is(err, lrbus.ErrNoLeader) {
		t.Fatalf("Request between leaders: %v, want ErrNoLeader", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := wcl.Publish(wctx, []byte("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Publish with WaitForLeader between leaders: %v, want the ctx's deadline", err)
	}
	published := make(chan error, 1)
	go func() { published <- wcl.Publish(ctx, []byte("waited")) }()
	shared, err := a.Acquire(ctx, "job", elect.Request{Mode: elect.Shared})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(a, shared); !errors.Is(err, lrbus.ErrNotExclusive) {
		t.Fatalf("Listen of a shared leadership: %v, want ErrNotExclusive", err)
	}
	shared.Release()
	lead2 := acquire(t, ctx, a, "job")
	serveBus(t, a, lead2)
	if err := <-published; err != nil {
		t.Fatalf("the waiting Publish: %v", err)
	}
	for {
		ev := nextEvent(t, wcl, "the waited message")
		if ev.Kind == lrbus.EventMessage {
			if string(ev.Message.Data) != "waited" || ev.Message.Epoch != lead2.Epoch() || ev.Message.Seq != 1 {
				t.Fatalf("waited message %+v", ev.Message)
			}
			break
		}
	}
	// PublishOnly receives leaders, not messages.
	for {
		select {
		case ev := <-cl.Events():
			if ev.Kind == lrbus.EventMessage {
				t.Fatalf("a PublishOnly client got %+v", ev)
			}
			continue
		case <-time.After(300 * time.Millisecond):
		}
		break
	}
	cl.Close()
	if _, ok := <-cl.Events(); ok {
		t.Fatal("Events not closed after Close")
	}
	if err := cl.Publish(ctx, nil); !errors.Is(err, lrbus.ErrClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}
}

func waitFor(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBusTooLarge(t *testing.T) {
	c := sharedCluster(t)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	a := open(t, c, pfx, etcd.Config{})
	lead := acquire(t, ctx, a, "job")
	srv, stop := serveBus(t, a, lead, WithHandler(func(ctx context.Context, r lrbus.Request) ([]byte, error) {
		return make([]byte, lrbus.DefaultMaxMessageSize+1), nil
	}))
	cl := dial(t, a, "job", DialOptions{})
	wantKind(t, nextEvent(t, cl, "first"), lrbus.EventLeader, "first")
	big := bytes.Repeat([]byte("x"), lrbus.DefaultMaxMessageSize+1)
	if err := cl.Publish(ctx, big); !errors.Is(err, lrbus.ErrTooLarge) {
		t.Fatalf("member Publish of 1MiB+1: %v", err)
	}
	if _, err := srv.Publish(big); !errors.Is(err, lrbus.ErrTooLarge) {
		t.Fatalf("server Publish of 1MiB+1: %v", err)
	}
	if _, err := cl.Request(ctx, big); !errors.Is(err, lrbus.ErrTooLarge) {
		t.Fatalf("Request of 1MiB+1: %v", err)
	}
	if _, err := cl.Request(ctx, []byte("x")); !errors.Is(err, lrbus.ErrTooLarge) {
		t.Fatalf("Request answered with 1MiB+1: %v", err)
	}
	// The limit itself passes.
	if err := cl.Publish(ctx, big[:lrbus.DefaultMaxMessageSize]); err != nil {
		t.Fatalf("Publish of 1MiB: %v", err)
	}
	ev := nextEvent(t, cl, "1MiB message")
	if ev.Kind != lrbus.EventMessage || ev.Message.Seq != 1 || len(ev.Message.Data) != lrbus.DefaultMaxMessageSize {
		t.Fatalf("1MiB message: %v seq %d, %d bytes", ev.Kind, ev.Message.Seq, len(ev.Message.Data))
	}
	stop()
	lead.Release()

	// Above etcd's own limit (--max-request-bytes, 1.5MiB by default).
	lead = acquire(t, ctx, a, "job")
	srv, _ = serveBus(t, a, lead, WithMaxMessageSize(4<<20))
	waitFor(t, func() bool { l, ok := cl.Leader(); return ok && l.Epoch == lead.Epoch() }, "the second term")
	huge := bytes.Repeat([]byte("y"), 2<<20)
	if err := cl.Publish(ctx, huge); !errors.Is(err, lrbus.ErrTooLarge) {
		t.Fatalf("member Publish of 2MiB past etcd's limit: %v", err)
	}
	if _, err := srv.PublishWait(ctx, huge); !errors.Is(err, lrbus.ErrTooLarge) {
		t.Fatalf("server Publish of 2MiB past etcd's limit: %v", err)
	}
	if seq, err := srv.PublishWait(ctx, []byte("after")); err != nil || seq != 1 {
		t.Fatalf("after the refusals: seq %d, %v; want 1", seq, err)
	}
}

func TestBusRequest(t *testing.T) {
	c := sharedCluster(t)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	a := open(t, c, pfx, etcd.Config{})
	m := open(t, c, pfx, etcd.Config{})
	started := make(chan struct{}, 4)
	hungUp := make(chan struct{}, 4)
	handler := func(ctx context.Context, r lrbus.Request) ([]byte, error) {
		switch string(r.Data) {
		case "fail":
			return nil, errors.New("boom")
		case "block", "hangup":
			started <- struct{}{}
			<-ctx.Done()
			if string(r.Data) == "hangup" {
				hungUp <- struct{}{}
			}
			return nil, ctx.Err()
		}
		return fmt.Appendf(nil, "re:%s pid %d", r.Data, r.PID), nil
	}
	lead := acquire(t, ctx, a, "job")
	serveBus(t, a, lead, WithHandler(handler))
	cl := dial(t, m, "job", DialOptions{})
	got, err := cl.Request(ctx, []byte("hi"))
	if want := fmt.Sprintf("re:hi pid %d", os.Getpid()); err != nil || string(got) != want {
		t.Fatalf("Request: %q, %v; want %q", got, err, want)
	}
	if _, err := cl.Request(ctx, []byte("fail")); !errors.Is(err, lrbus.ErrHandler) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Request of a failing handler: %v", err)
	}
	// A member that gives up cancels the handler.
	hctx, cancel := context.WithCancel(ctx)
	go func() { <-started; cancel() }()
	if _, err := cl.Request(hctx, []byte("hangup")); !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned Request: %v", err)
	}
	select {
	case <-hungUp:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler's ctx did not end when its member gave up")
	}

	// The term ends before the reply.
	errc := make(chan error, 1)
	go func() {
		_, err := cl.Request(ctx, []byte("block"))
		errc <- err
	}()
	<-started
	lead.Release()
	select {
	case err := <-errc:
		if !errors.Is(err, lrbus.ErrLeaderChanged) {
			t.Fatalf("Request across the term's end: %v, want ErrLeaderChanged", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Request did not return after the term ended")
	}

	// A leader without a handler.
	lead = acquire(t, ctx, a, "job")
	serveBus(t, a, lead)
	waitFor(t, func() bool { l, ok := cl.Leader(); return ok && l.Epoch == lead.Epoch() }, "the handler-less term")
	if _, err := cl.Request(ctx, []byte("hi")); !errors.Is(err, lrbus.ErrNoHandler) {
		t.Fatalf("Request without a handler: %v", err)
	}
}

// TestBusDeadTerm: a publication addressed to a term that has ended is
// refused by etcd, and does not land in the term that follows.
func TestBusDeadTerm(t *testing.T) {
	c := sharedCluster(t)
	cli := c.Client(t)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	a := open(t, c, pfx, etcd.Config{})
	b := open(t, c, pfx, etcd.Config{})
	m := open(t, c, pfx, etcd.Config{})
	lead1 := acquire(t, ctx, a, "job")
	srv1, stop1 := serveBus(t, a, lead1)
	cl := dial(t, m, "job", DialOptions{})
	cl.mu.Lock()
	t1 := cl.term
	cl.mu.Unlock()
	stop1()
	lead1.Release()
	if _, err := srv1.Publish([]byte("stale")); !errors.Is(err, lrbus.ErrClosed) {
		t.Fatalf("server Publish after its term: %v, want ErrClosed", err)
	}
	lead2 := acquire(t, ctx, b, "job")
	serveBus(t, b, lead2)
	waitFor(t, func() bool { l, ok := cl.Leader(); return ok && l.Epoch == lead2.Epoch() }, "the second term")
	// Straight to the first term's channel, as a member that has not yet
	// seen the change would.
	ok, err := cl.publishTo(ctx, t1, []byte("stale"))
	if err != nil || ok {
		t.Fatalf("publish to the ended term: ok %v, %v; want refused", ok, err)
	}
	cl.mu.Lock()
	t2 := cl.term
	cl.mu.Unlock()
	r, err := cli.Get(ctx, t2.busKey)
	if err != nil || len(r.Kvs) != 1 || r.Kvs[0].Version != 1 {
		t.Fatalf("the second term's channel: %+v, %v; want only its opening version", r.Kvs, err)
	}
	if r, _ := cli.Get(ctx, t1.busKey); len(r.Kvs) != 0 {
		t.Fatalf("the first term's channel is back: %+v", r.Kvs)
	}
	// A Publish that finds its term ended goes to the next.
	if err := cl.Publish(ctx, []byte("now")); err != nil {
		t.Fatal(err)
	}
	for {
		ev := nextEvent(t, cl, "message")
		if ev.Kind == lrbus.EventMessage {
			if string(ev.Message.Data) != "now" || ev.Message.Epoch != lead2.Epoch() || ev.Message.Seq != 1 {
				t.Fatalf("message %+v", ev.Message)
			}
			break
		}
	}
}

// TestBusLeavesNothing: after members close and the term ends, no key of
// the bus remains under the name.
func TestBusLeavesNothing(t *testing.T) {
	c := sharedCluster(t)
	cli := c.Client(t)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	a := open(t, c, pfx, etcd.Config{})
	m := open(t, c, pfx, etcd.Config{})
	lead := acquire(t, ctx, a, "job")
	block := make(chan struct{})
	srv, stop := serveBus(t, a, lead, WithHandler(func(ctx context.Context, r lrbus.Request) ([]byte, error) {
		if string(r.Data) == "block" {
			<-block
		}
		return r.Data, nil
	}))
	cl := dial(t, m, "job", DialOptions{})
	for i := range 3 {
		srv.Publish(fmt.Append(nil, i))
		if err := cl.Publish(ctx, []byte("m")); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Request(ctx, []byte("r")); err != nil {
			t.Fatal(err)
		}
	}
	// One request still pending when the server stops.
	errc := make(chan error, 1)
	go func() { _, err := cl.Request(ctx, []byte("block")); errc <- err }()
	waitKeys(t, cli, pfx+"job/"+dirReq, 1)
	keysLeft := func() []string {
		r, err := cli.Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, kv := range r.Kvs {
			if k := string(kv.Key); k != pfx+"job/epoch" {
				ks = append(ks, k)
			}
		}
		return ks
	}
	go func() { time.Sleep(100 * time.Millisecond); close(block) }()
	stop()
	if err := <-errc; err != nil && !errors.Is(err, lrbus.ErrLeaderChanged) {
		t.Fatalf("the pending request: %v", err)
	}
	lead.Release()
	cl.Close()
	if ks := keysLeft(); len(ks) != 0 {
		t.Fatalf("left behind: %v", ks)
	}

	// A holder that dies: its lease takes the bus with it, and the member
	// deletes its own pending request.
	lead = acquire(t, ctx, a, "job")
	serveBus(t, a, lead, WithHandler(func(ctx context.Context, r lrbus.Request) ([]byte, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}))
	cl = dial(t, m, "job", DialOptions{})
	go func() { _, err := cl.Request(ctx, []byte("x")); errc <- err }()
	waitKeys(t, cli, pfx+"job/"+dirReq, 1)
	id := leaseOf(t, a)
	if _, err := cli.Revoke(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, lrbus.ErrLeaderChanged) {
		t.Fatalf("request to a holder whose lease went: %v", err)
	}
	cl.Close()
	waitFor(t, func() bool { return len(keysLeft()) == 0 }, "the keys to go")
}

// TestBusGuards: the compares every write to a term carries hold while
// its grant marker and serve key are the ones made and no steal came
// after the grant, a steal that is itself the holder included.
func TestBusGuards(t *testing.T) {
	c := sharedCluster(t)
	cli := c.Client(t)
	ctx := testCtx(t)
	base := testPrefix(t) + "job/"
	put := func(k string) int64 {
		t.Helper()
		r, err := cli.Put(ctx, k, "{}")
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	holds := func(tm *busTerm) bool {
		t.Helper()
		r, err := cli.Txn(ctx).If(tm.guards()...).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return r.Succeeded
	}
	// The holder is a steal: its own steal key came before its grant.
	put(base + seam.DirSteal + "own")
	grant := put(base + seam.DirHeld + "own")
	tm := newBusTerm(base, serving{Held: base + seam.DirHeld + "own", GrantRev: grant, Epoch: 7}, put(base+dirServe+"7"))
	if !holds(tm) {
		t.Fatal("the guards fail for a live term whose holder is a steal")
	}
	put(base + seam.DirSteal + "later")
	if holds(tm) {
		t.Fatal("the guards hold after a later steal")
	}
	cli.Delete(ctx, base+seam.DirSteal+"later")
	if !holds(tm) {
		t.Fatal("the guards fail once the later steal went")
	}
	// The grant marker made again (a new term of the same id) or gone.
	cli.Delete(ctx, base+seam.DirHeld+"own")
	if holds(tm) {
		t.Fatal("the guards hold without the grant marker")
	}
	tm.info.GrantRev = put(base + seam.DirHeld + "own")
	if !holds(tm) {
		t.Fatal("the guards fail for the marker as made")
	}
	put(base + dirServe + "7") // an update keeps its creation revision
	if !holds(tm) {
		t.Fatal("the guards fail after the serve key's update")
	}
	cli.Delete(ctx, base+dirServe+"7")
	put(base + dirServe + "7")
	if holds(tm) {
		t.Fatal("the guards hold for a serve key made again")
	}
}

// TestBusQueueFull: the leader's Publish never waits for etcd; beyond its
// queue it drops with ErrFull, and members see Gap on the next message
// committed, although its seq follows on.
func TestBusQueueFull(t *testing.T) {
	c := sharedCluster(t)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	a := open(t, c, pfx, etcd.Config{})
	lead := acquire(t, ctx, a, "job")
	srv, _ := serveBus(t, a, lead, WithQueue(2, 1<<20))
	cl := dial(t, a, "job", DialOptions{})
	wantKind(t, nextEvent(t, cl, "first"), lrbus.EventLeader, "first")
	queued, full := 0, 0
	for i := 0; i < 200 && full == 0; i++ {
		_, err := srv.Publish(fmt.Append(nil, i))
		switch {
		case err == nil:
			queued++
		case errors.Is(err, ErrFull):
			full++
		default:
			t.Fatal(err)
		}
	}
	if full == 0 {
		t.Fatal("200 Publish calls in a row never filled a queue of 2")
	}
	var seq uint64
	var err error
	for {
		seq, err = srv.PublishWait(ctx, []byte("after"))
		if !errors.Is(err, ErrFull) {
			break
		}
		time.Sleep(time.Millisecond) // until the writer has made room
	}
	if err != nil {
		t.Fatal(err)
	}
	if seq != uint64(queued)+1 {
		t.Fatalf("seq %d after %d queued", seq, queued)
	}
	for n := uint64(1); n <= seq; n++ {
		ev := nextEvent(t, cl, fmt.Sprint("seq ", n))
		if ev.Kind != lrbus.EventMessage || ev.Message.Seq != n {
			t.Fatalf("got %v %+v, want seq %d", ev.Kind, ev.Message, n)
		}
		if last := n == seq; ev.Gap != last {
			t.Fatalf("seq %d (%q): Gap %v; want it only on the message after the drop", n, ev.Message.Data, ev.Gap)
		}
	}
}

// TestBusEtcdLeaderKilled: the raft leader of a 3-member etcd is killed
// while the bus carries messages; every member still receives one and
// the same sequence, each message once and in order, a hole only where
// Gap says so.
func TestBusEtcdLeaderKilled(t *testing.T) {
	etcdtest.Require(t)
	c := etcdtest.StartT(t, 3)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	a := open(t, c, pfx, etcd.Config{})
	lead := acquire(t, ctx, a, "job")
	srv, _ := serveBus(t, a, lead)
	var members []*Client
	for range 2 {
		cl := dial(t, open(t, c, pfx, etcd.Config{}), "job", DialOptions{})
		wantKind(t, nextEvent(t, cl, "first"), lrbus.EventLeader, "first")
		members = append(members, cl)
	}
	const n = 60
	var last uint64
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := range n {
			if i == n/3 {
				m, err := c.Leader(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				m.Kill()
			}
			seq, err := srv.PublishWait(ctx, fmt.Append(nil, i))
			if err == nil {
				last = seq
			} else if errors.Is(err, lrbus.ErrLeaderChanged) {
				t.Logf("message %d: %v", i, err)
			} else {
				t.Error(err)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	select {
	case <-published:
	case <-time.After(50 * time.Second):
		t.Fatal("publishing did not finish")
	}
	if lead.Err() != nil {
		t.Fatalf("the term ended: %v", lead.Err())
	}
	var first []string
	for i, cl := range members {
		var got []string
		var prev uint64
		for prev < last {
			ev := nextEvent(t, cl, fmt.Sprintf("member %d after seq %d of %d", i, prev, last))
			wantKind(t, ev, lrbus.EventMessage, "message")
			if s := ev.Message.Seq; s <= prev || (s != prev+1 && !ev.Gap) {
				t.Fatalf("member %d: seq %d after %d, gap %v", i, s, prev, ev.Gap)
			}
			prev = ev.Message.Seq
			got = append(got, fmt.Sprintf("%d:%s", prev, ev.Message.Data))
		}
		if i == 0 {
			first = got
		} else if strings.Join(got, " ") != strings.Join(first, " ") {
			t.Fatalf("member %d got\n%v\nmember 0\n%v", i, got, first)
		}
	}
	t.Logf("%d of %d messages committed, last seq %d", len(first), n, last)
}
