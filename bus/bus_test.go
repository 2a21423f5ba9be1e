package bus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/layout"
	"github.com/leaderrun/leaderrun/oslock"
)

const testName = "job"

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// newLead is a leadership made by hand, as a backend makes one, on the
// checked directory dir (its handle lives as long as the test binary).
func newLead(dir string, epoch uint64) (*elect.Leadership, func(error)) {
	return elect.NewLeadershipIn(elect.Term{Name: testName, Dir: dir, Mode: elect.Exclusive, Epoch: epoch, Since: time.Now()}, lockDir(dir))
}

func lockDir(dir string) *oslock.Dir {
	d, err := oslock.OpenDir(dir, oslock.DirOptions{})
	if err != nil {
		panic(err)
	}
	return d
}

// startServer serves a bus for a fake leadership of epoch until the test
// ends or stop is called.
func startServer(t *testing.T, dir string, epoch uint64, opts ...ServerOption) (*Server, func()) {
	t.Helper()
	lead, _ := newLead(dir, epoch)
	s, err := Listen(lead, opts...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Serve(context.Background())
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			s.Close()
			<-done
			lead.Release()
		})
	}
	t.Cleanup(stop)
	return s, stop
}

func dial(t *testing.T, ctx context.Context, dir string, opts ...DialOption) *Client {
	t.Helper()
	c, err := Dial(ctx, dir, testName, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// next returns the next event or fails the test at ctx's end.
func next(t *testing.T, ctx context.Context, c *Client) Event {
	t.Helper()
	select {
	case ev, ok := <-c.Events():
		if !ok {
			t.Fatal("events closed")
		}
		return ev
	case <-ctx.Done():
		t.Fatal("no event before the deadline")
	}
	panic("unreachable")
}

func nextKind(t *testing.T, ctx context.Context, c *Client, k EventKind) Event {
	t.Helper()
	ev := next(t, ctx, c)
	if ev.Kind != k {
		t.Fatalf("got %v event (%+v), want %v", ev.Kind, ev, k)
	}
	return ev
}

// waitMembers waits until the server has n members.
func waitMembers(t *testing.T, ctx context.Context, s *Server, n int) {
	t.Helper()
	for s.Members() != n {
		select {
		case <-ctx.Done():
			t.Fatalf("%d members, want %d", s.Members(), n)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestSocketName(t *testing.T) {
	if got, want := sockName(testName), filepath.Base(layout.SocketPath("/x", testName)); got != want {
		t.Fatalf("socket %q, elect says %q", got, want)
	}
}

func TestFanOutAndOrder(t *testing.T) {
	ctx := testCtx(t, 10*time.Second)
	dir := t.TempDir()
	s, _ := startServer(t, dir, 7)
	fi, err := os.Lstat(filepath.Join(dir, testName+".sock"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want a 0600 socket", fi.Mode())
	}
	var cs []*Client
	for range 3 {
		c := dial(t, ctx, dir)
		ev := nextKind(t, ctx, c, EventLeader)
		if ev.Leader.Epoch != 7 || ev.Leader.PID != os.Getpid() || ev.Leader.Name != testName || ev.Leader.Mode != elect.Exclusive || ev.Gap {
			t.Fatalf("leader event %+v", ev)
		}
		cs = append(cs, c)
	}
	const n = 200
	publishFromAll(t, ctx, s, cs, n)
	checkOneOrder(t, ctx, cs, n*(len(cs)+1))
	if l, ok := cs[0].Leader(); !ok || l.Epoch != 7 {
		t.Fatalf("Leader() = %+v, %v", l, ok)
	}
}

// publishFromAll publishes n messages from each client and n from s, all
// at once.
func publishFromAll(t *testing.T, ctx context.Context, s *Server, cs []*Client, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			for j := range n {
				if err := c.Publish(ctx, fmt.Appendf(nil, "c%d-%d", i, j)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for j := range n {
		if _, err := s.Publish(fmt.Appendf(nil, "s-%d", j)); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

// checkOneOrder reads total messages of epoch 7 on each client and checks
// that every client saw them numbered 1..total, in one order.
func checkOneOrder(t *testing.T, ctx context.Context, cs []*Client, total int) {
	t.Helper()
	var first []string
	for i, c := range cs {
		var got []string
		for k := range total {
			ev := nextKind(t, ctx, c, EventMessage)
			if ev.Message.Seq != uint64(k+1) || ev.Message.Epoch != 7 || ev.Message.PID != os.Getpid() {
				t.Fatalf("client %d message %d: %+v", i, k, ev.Message)
			}
			got = append(got, string(ev.Message.Data))
		}
		if i == 0 {
			first = got
			continue
		}
		for k := range got {
			if got[k] != first[k] {
				t.Fatalf("client %d saw %q at %d, client 0 saw %q", i, got[k], k, first[k])
			}
		}
	}
}

func TestNoLeader(t *testing.T) {
	ctx := testCtx(t, 10*time.Second)
	dir := t.TempDir()
	if _, err := Dial(ctx, dir, testName); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Dial without a leader: %v, want ErrNoLeader", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := Dial(short, dir, testName, WaitForLeader()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting Dial: %v, want DeadlineExceeded", err)
	}
	got := make(chan *Client, 1)
	sleeping := make(chan struct{})
	var once sync.Once
	hook := func() { once.Do(func() { close(sleeping) }) }
	awaitHook.Store(&hook)
	defer awaitHook.Store(nil)
	go func() {
		c, err := Dial(ctx, dir, testName, WaitForLeader())
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	select { // the server must come while Dial sleeps, or the case is not tested
	case <-sleeping:
	case <-ctx.Done():
		t.Fatal("Dial with WaitForLeader never started waiting")
	}
	_, stop := startServer(t, dir, 1)
	c := <-got
	if c == nil {
		return
	}
	defer c.Close()
	nextKind(t, ctx, c, EventLeader)
	c2 := dial(t, ctx, dir)
	nextKind(t, ctx, c2, EventLeader)
	stop()
	for _, c := range []*Client{c, c2} {
		if ev := nextKind(t, ctx, c, EventLost); !errors.Is(ev.Err, ErrLeaderGone) {
			t.Fatalf("lost: %v, want ErrLeaderGone", ev.Err)
		}
	}
	short, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := c.Publish(short, []byte("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting Publish between leaders: %v, want DeadlineExceeded", err)
	}
	if err := c2.Publish(ctx, []byte("x")); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Publish between leaders: %v, want ErrNoLeader", err)
	}
	if _, err := c2.Request(ctx, []byte("x")); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Request between leaders: %v, want ErrNoLeader", err)
	}
}

func TestRequest(t *testing.T) {
	ctx := testCtx(t, 10*time.Second)
	dir := t.TempDir()
	startServer(t, dir, 1, MaxMessageSize(1000), WithHandler(func(ctx context.Context, r Request) ([]byte, error) {
		switch string(r.Data) {
		case "fail":
			return nil, errors.New("no such thing")
		case "big":
			return make([]byte, 2000), nil
		}
		if r.UID != os.Geteuid() || r.PID != os.Getpid() {
			return nil, fmt.Errorf("peer uid %d pid %d", r.UID, r.PID)
		}
		return append([]byte("re: "), r.Data...), nil
	}))
	c := dial(t, ctx, dir, PublishOnly())
	got, err := c.Request(ctx, []byte("hello"))
	if err != nil || string(got) != "re: hello" {
		t.Fatalf("Request = %q, %v", got, err)
	}
	if _, err := c.Request(ctx, []byte("fail")); !errors.Is(err, ErrHandler) || err.Error() != "bus: leader's handler failed: no such thing" {
		t.Fatalf("failing handler: %v", err)
	}
	if _, err := c.Request(ctx, []byte("big")); !errors.Is(err, ErrHandler) {
		t.Fatalf("oversized reply: %v", err)
	}
	if _, err := c.Request(ctx, make([]byte, 1001)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized request: %v", err)
	}
	if err := c.Publish(ctx, make([]byte, 1001)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized publish: %v", err)
	}
	if err := c.Publish(ctx, make([]byte, 1000)); err != nil {
		t.Fatalf("publish at the limit: %v", err)
	}

	dir2 := t.TempDir()
	s2, _ := startServer(t, dir2, 1)
	if _, err := s2.Publish(make([]byte, DefaultMaxMessageSize+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("leader's oversized publish: %v", err)
	}
	c2 := dial(t, ctx, dir2)
	if _, err := c2.Request(ctx, nil); !errors.Is(err, ErrNoHandler) {
		t.Fatalf("no handler: %v", err)
	}
}

func TestStepDownAndGap(t *testing.T) {
	ctx := testCtx(t, 10*time.Second)
	dir := t.TempDir()
	s1, stop1 := startServer(t, dir, 1)
	c := dial(t, ctx, dir)
	nextKind(t, ctx, c, EventLeader)
	s1.Publish([]byte("a"))
	stop1()
	nextKind(t, ctx, c, EventMessage)
	nextKind(t, ctx, c, EventLost)

	// Everything arrived and the new term is fresh: no gap.
	s2, stop2 := startServer(t, dir, 2)
	if ev := nextKind(t, ctx, c, EventLeader); ev.Leader.Epoch != 2 || ev.Gap {
		t.Fatalf("after a clean step-down: %+v", ev)
	}
	waitMembers(t, ctx, s2, 1)
	// A leader that goes away without a word leaves a gap, and so does a
	// term that published before the member joined.
	s2.Publish([]byte("b"))
	nextKind(t, ctx, c, EventMessage)
	stop2()
	nextKind(t, ctx, c, EventLost)
	lead3, _ := newLead(dir, 3)
	s3, err := Listen(lead3)
	if err != nil {
		t.Fatal(err)
	}
	s3.Publish([]byte("missed"))
	done := make(chan error, 1)
	go func() { done <- s3.Serve(ctx) }()
	defer func() { s3.Close(); <-done }()
	if ev := nextKind(t, ctx, c, EventLeader); ev.Leader.Epoch != 3 || !ev.Gap {
		t.Fatalf("joining a term that already published: %+v", ev)
	}
	s3.Publish([]byte("c"))
	if ev := nextKind(t, ctx, c, EventMessage); ev.Message.Seq != 2 || string(ev.Message.Data) != "c" {
		t.Fatalf("message %+v", ev.Message)
	}
}

func TestServeEndsWithLeadership(t *testing.T) {
	ctx := testCtx(t, 10*time.Second)
	dir := t.TempDir()
	lead, end := newLead(dir, 1)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, lead) }()
	c, err := Dial(ctx, dir, testName, WaitForLeader())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nextKind(t, ctx, c, EventLeader)
	end(elect.ErrStolen)
	if err := <-done; !errors.Is(err, elect.ErrStolen) {
		t.Fatalf("Serve = %v, want the leadership's end", err)
	}
	if ev := nextKind(t, ctx, c, EventLost); !errors.Is(ev.Err, ErrLeaderGone) {
		t.Fatalf("lost: %v", ev.Err)
	}
	// The lock is no longer ours: the socket stays for the next leader
	// to replace.
	if _, err := os.Lstat(filepath.Join(dir, testName+".sock")); err != nil {
		t.Fatalf("socket removed after the leadership ended: %v", err)
	}
	if _, err := Dial(ctx, dir, testName); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Dial to a stale socket: %v, want ErrNoLeader", err)
	}
	lead.Release()
	if _, err := Listen(lead); err == nil {
		t.Fatal("Listen with an ended leadership succeeded")
	}
	shared, _ := elect.NewLeadershipIn(elect.Term{Name: testName, Dir: dir, Mode: elect.Shared, Epoch: 2}, lockDir(dir))
	if _, err := Listen(shared); !errors.Is(err, ErrNotExclusive) {
		t.Fatalf("Listen with a shared leadership: %v", err)
	}
	// A stale socket is replaced by the next leader.
	_, stop := startServer(t, dir, 2)
	defer stop()
	c2 := dial(t, ctx, dir)
	if ev := nextKind(t, ctx, c2, EventLeader); ev.Leader.Epoch != 2 {
		t.Fatalf("%+v", ev)
	}
}

// rawMember completes the handshake by hand and returns the connection.
func rawMember(t *testing.T, ctx context.Context, dir string) *net.UnixConn {
	t.Helper()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", filepath.Join(dir, testName+".sock"))
	if err != nil {
		t.Fatal(err)
	}
	uc := nc.(*net.UnixConn)
	t.Cleanup(func() { uc.Close() })
	uc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := handshake(uc, newFrameReader(uc, 1<<20), clientHello{version: protoVersion, pid: 1}); err != nil {
		t.Fatal(err)
	}
	uc.SetDeadline(time.Time{})
	return uc
}

// A socket removed under a serving leader (a cleaner, a user's rm) is put
// back: a member that comes later still finds the leader, and one already
// connected keeps its connection.
func TestRemovedSocketIsPutBack(t *testing.T) {
	dir := t.TempDir()
	ctx := testCtx(t, 10*time.Second)
	startServer(t, dir, 7)
	early := dial(t, ctx, dir)
	if ev := next(t, ctx, early); ev.Kind != EventLeader {
		t.Fatalf("first event %v", ev.Kind)
	}
	if err := os.Remove(filepath.Join(dir, testName+".sock")); err != nil {
		t.Fatal(err)
	}
	for {
		c, err := Dial(ctx, dir, testName)
		if err == nil {
			if ev := next(t, ctx, c); ev.Kind != EventLeader || ev.Leader.Epoch != 7 {
				t.Fatalf("late member's first event: %+v", ev)
			}
			c.Close()
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the socket was not put back: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := early.Publish(ctx, []byte("still here")); err != nil {
		t.Fatalf("the early member lost its connection: %v", err)
	}
}

// A lock directory moved away under a serving leader leaves its socket
// where no member looks: the keeper, woken by the socket's change and
// finding the old path gone, stops keeping it (it used to receive from a
// nil watch and crash the leader, found by CI's clichaos), and the member
// already connected carries on.
func TestKeeperAfterDirectoryMoved(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "d")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 10*time.Second)
	ended := make(chan struct{})
	var once sync.Once
	hook := func() { once.Do(func() { close(ended) }) }
	keepHook.Store(&hook)
	defer keepHook.Store(nil)
	startServer(t, dir, 3)
	c := dial(t, ctx, dir)
	nextKind(t, ctx, c, EventLeader)
	moved := filepath.Join(parent, "moved")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	// Wake the keeper for certain: a change of the socket itself.
	if err := os.Chmod(filepath.Join(moved, testName+".sock"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-ctx.Done():
		t.Fatal("the keeper never looked again after the directory moved")
	}
	if err := c.Publish(ctx, []byte("still here")); err != nil {
		t.Fatalf("the member lost its connection: %v", err)
	}
}
