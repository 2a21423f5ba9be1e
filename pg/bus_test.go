package pg

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
)

func nextEvent(t *testing.T, c *BusClient, what string) bus.Event {
	t.Helper()
	select {
	case ev, ok := <-c.Events():
		if !ok {
			t.Fatalf("%s: events closed", what)
		}
		return ev
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no event within 20s", what)
	}
	return bus.Event{}
}

// TestBus: a member on another session hears the leader, its messages in
// order with sequence numbers from 1, another member's publication with
// that member's pid, and the term's end after its last message; a
// message of an ended term is refused; a new leader is heard; too large a
// message and a bus nobody leads are refused.
func TestBus(t *testing.T) {
	srv := sharedServer(t)
	schema := testSchema(t)
	a, b, m, p := open(t, srv, schema, Config{}), open(t, srv, schema, Config{}), open(t, srv, schema, Config{}), open(t, srv, schema, Config{})
	ctx := t.Context()
	if _, err := m.DialBus(ctx, "bs", BusDial{}); !errors.Is(err, bus.ErrNoLeader) {
		t.Fatalf("dial with nobody leading: %v, want ErrNoLeader", err)
	}
	la, err := a.Acquire(ctx, "bs", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	sa, err := a.ListenBus(la)
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- sa.Serve(sctx) }()
	defer stop()
	mc, err := m.DialBus(ctx, "bs", BusDial{})
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	if ev := nextEvent(t, mc, "join"); ev.Kind != bus.EventLeader || ev.Leader.Epoch != la.Epoch() || ev.Leader.Host == "" {
		t.Fatalf("first event %+v, want the leader of epoch %d with its host", ev, la.Epoch())
	}
	pc, err := p.DialBus(ctx, "bs", BusDial{PublishOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	for i := 1; i <= 3; i++ {
		if seq, err := sa.Publish([]byte{byte('0' + i)}); err != nil || seq != uint64(i) {
			t.Fatalf("leader's publish %d: seq %d, %v", i, seq, err)
		}
	}
	if err := pc.Publish(ctx, []byte("from p")); err != nil {
		t.Fatalf("member's publish: %v", err)
	}
	for i := 1; i <= 4; i++ {
		ev := nextEvent(t, mc, "message")
		if ev.Kind != bus.EventMessage || ev.Message.Seq != uint64(i) || ev.Message.Epoch != la.Epoch() || ev.Gap {
			t.Fatalf("event %d: %+v", i, ev)
		}
		if i == 4 && string(ev.Message.Data) != "from p" {
			t.Fatalf("the member's message reads %q", ev.Message.Data)
		}
	}
	if err := pc.Publish(ctx, []byte(strings.Repeat("x", MaxBusMessage+1))); !errors.Is(err, bus.ErrTooLarge) {
		t.Fatalf("a message over the limit: %v, want ErrTooLarge", err)
	}
	if _, err := sa.Publish([]byte(strings.Repeat("x", MaxBusMessage+1))); !errors.Is(err, bus.ErrTooLarge) {
		t.Fatalf("the leader's message over the limit: %v, want ErrTooLarge", err)
	}
	// The term ends: the member hears it after the last message, and
	// nothing lands in the ended term.
	g := acquireAsync(ctx, b, "bs", elect.Request{})
	waitQueued(t, a, "bs", 1)
	la.Release()
	if _, err := sa.Publish([]byte("late")); err == nil {
		t.Fatal("a message was published in a term that had ended")
	}
	if ev := nextEvent(t, mc, "end of term"); ev.Kind != bus.EventLost || ev.Leader.Epoch != la.Epoch() {
		t.Fatalf("after the release: %+v, want EventLost of epoch %d", ev, la.Epoch())
	}
	select {
	case <-served:
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return within 20s of the term's end")
	}
	r := recvGrant(t, g)
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.lead.Release()
	sb, err := b.ListenBus(r.lead)
	if err != nil {
		t.Fatal(err)
	}
	go sb.Serve(sctx)
	if ev := nextEvent(t, mc, "new leader"); ev.Kind != bus.EventLeader || ev.Leader.Epoch != r.lead.Epoch() {
		t.Fatalf("%+v, want the new leader of epoch %d", ev, r.lead.Epoch())
	}
	// The publisher follows the bus on connections of its own and may
	// still know the old term, whose publications fail with
	// ErrLeaderChanged: it publishes once it has heard the new leader.
	for {
		ev := nextEvent(t, pc, "the publisher hears the new leader")
		if ev.Kind == bus.EventLeader && ev.Leader.Epoch == r.lead.Epoch() {
			break
		}
	}
	if err := pc.Publish(ctx, []byte("to b")); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, mc, "new term's message"); ev.Kind != bus.EventMessage || ev.Message.Seq != 1 || ev.Message.Epoch != r.lead.Epoch() {
		t.Fatalf("%+v", ev)
	}
}

// TestBusLeaderDies: a leading process is SIGKILLed; a member hears the
// term end once the holder's lease has expired, with no word from it.
// TestBusPublishBeforeServe: a member's publication waits for the
// leader's announcement, which Serve sends once it LISTENs, not for its
// first message: the leader's own Publish notifies without Serve, and a
// member that took that for a serving leader sent its publication to
// nobody and waited for ever for its answer (CI hung 10 minutes in TestBus
// so).
func TestBusPublishBeforeServe(t *testing.T) {
	ctx, _, p, sa := busLeader(t, "bp")
	pc, err := p.DialBus(ctx, "bp", BusDial{PublishOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	// The leader's message, before anything serves its bus, reaches the
	// member: it knows the term but must not publish into it yet.
	if _, err := sa.Publish([]byte("own")); err != nil {
		t.Fatal(err)
	}
	heard := func() bool {
		pc.mu.Lock()
		defer pc.mu.Unlock()
		return pc.serving
	}
	for deadline := time.Now().Add(10 * time.Second); !heard(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the member did not hear the leader's message within 10s")
		}
	}
	published := make(chan error, 1)
	go func() { published <- pc.Publish(ctx, []byte("from p")) }()
	select {
	case err := <-published:
		t.Fatalf("Publish returned %v before the leader served its bus", err)
	case <-time.After(200 * time.Millisecond):
	}
	go sa.Serve(ctx)
	select {
	case err := <-published:
		if err != nil {
			t.Fatalf("the member's publication: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the member's publication was not answered within 20s")
	}
}

func TestBusLeaderDies(t *testing.T) {
	srv := sharedServer(t)
	schema := testSchema(t)
	const ttl = 3 * time.Second
	m := open(t, srv, schema, Config{TTL: ttl})
	h := contender(t, srv, schema, "bd", ttl)
	h.Expect("leader ")
	mc, err := m.DialBus(t.Context(), "bd", BusDial{})
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	if ev := nextEvent(t, mc, "join"); ev.Kind != bus.EventLeader {
		t.Fatalf("%+v", ev)
	}
	killed := time.Now()
	h.Kill()
	if ev := nextEvent(t, mc, "death"); ev.Kind != bus.EventLost {
		t.Fatalf("%+v, want EventLost", ev)
	}
	if d := time.Since(killed); d > ttl+2*time.Second {
		t.Fatalf("the member heard of the death %v after it (TTL %v)", d, ttl)
	}
}

// TestBusEndOnPublishingConn: the leader tells its members that the term
// is over on the connection its messages went on, open since it said it
// leads (the Locker's connection for queries), not on one opened then,
// since the term's release waits for it; the member hears it.
func TestBusEndOnPublishingConn(t *testing.T) {
	srv := sharedServer(t)
	schema := testSchema(t)
	a, m := open(t, srv, schema, Config{}), open(t, srv, schema, Config{})
	ctx := t.Context()
	la, err := a.Acquire(ctx, "be", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	sa, err := a.ListenBus(la)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- sa.Serve(ctx) }()
	mc, err := m.DialBus(ctx, "be", BusDial{})
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	nextEvent(t, mc, "join")
	var publishing *pgx.Conn
	for deadline := time.Now().Add(10 * time.Second); publishing == nil; time.Sleep(time.Millisecond) {
		a.admin.mu.Lock()
		publishing = a.admin.c
		a.admin.mu.Unlock()
		if publishing == nil && time.Now().After(deadline) {
			t.Fatal("the leader did not say it leads, on its Locker's connection for queries, within 10s")
		}
	}
	la.Release()
	select {
	case <-served:
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return within 20s of the release")
	}
	if ev := nextEvent(t, mc, "the term's end"); ev.Kind != bus.EventLost {
		t.Fatalf("after the release the member heard %+v, want the leader lost", ev)
	}
	a.admin.mu.Lock()
	after := a.admin.c
	a.admin.mu.Unlock()
	if after != publishing || after.IsClosed() {
		t.Fatal("the leader opened a connection to say the term is over")
	}
}

// busLeader opens two Lockers on one schema, a and p, and has a lead name
// with its bus (not served yet); ctx bounds the test at 20s.
func busLeader(t *testing.T, name string) (ctx context.Context, a, p *Locker, sa *BusServer) {
	t.Helper()
	srv := sharedServer(t)
	schema := testSchema(t)
	a, p = open(t, srv, schema, Config{}), open(t, srv, schema, Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	la, err := a.Acquire(ctx, name, elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { la.Release() })
	sa, err = a.ListenBus(la)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, a, p, sa
}

// TestBusPublishResent: a publication the leader does not sequence (a
// lost notification, a failed statement: testDropPub drops the first copy
// of each) is sent again until it is, not waited for until ctx ends; the
// leader sequences it once, and a member gets it once.
func TestBusPublishResent(t *testing.T) {
	var mu sync.Mutex
	dropped := map[string]bool{}
	testDropPub = func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		if dropped[id] {
			return false
		}
		dropped[id] = true
		return true
	}
	t.Cleanup(func() { testDropPub = nil })
	ctx, a, p, sa := busLeader(t, "br")
	go sa.Serve(ctx)
	member, err := a.DialBus(ctx, "br", BusDial{})
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	pc, err := p.DialBus(ctx, "br", BusDial{PublishOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if err := pc.Publish(ctx, []byte("again")); err != nil {
		t.Fatalf("a publication whose first copy was lost: %v", err)
	}
	mu.Lock()
	n := len(dropped)
	mu.Unlock()
	if n != 1 {
		t.Fatalf("%d publications dropped, want 1", n)
	}
	// The marker message after it: the member has seen all before it.
	if _, err := sa.Publish([]byte("end")); err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		select {
		case ev := <-member.Events():
			if ev.Kind != bus.EventMessage {
				continue
			}
			switch string(ev.Message.Data) {
			case "again":
				got++
			case "end":
				if got != 1 {
					t.Fatalf("the member got the publication %d times, want once", got)
				}
				return
			}
		case <-ctx.Done():
			t.Fatal("the member did not get the messages within 20s")
		}
	}
}

// TestBusSeenBounded: a leader remembers its members' latest seenMax
// publications, not every one of a term.
func TestBusSeenBounded(t *testing.T) {
	s := &BusServer{seen: map[string]uint64{}}
	for i := range seenMax + 10 {
		s.remember(strconv.Itoa(i), uint64(i+1))
	}
	if len(s.seen) != seenMax || len(s.ids) != seenMax {
		t.Fatalf("remembers %d publications (%d ids), want %d", len(s.seen), len(s.ids), seenMax)
	}
	if _, ok := s.seen["9"]; ok {
		t.Error("the 10th publication is remembered after seenMax+10")
	}
	if seq, ok := s.seen[strconv.Itoa(seenMax+9)]; !ok || seq != seenMax+10 {
		t.Errorf("the latest publication: seq %d, remembered %v; want %d", seq, ok, seenMax+10)
	}
}
