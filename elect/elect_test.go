package elect

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leaderrun/leaderrun/internal/layout"
	"github.com/leaderrun/leaderrun/internal/proctest"
)

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// watchingMounts reports whether this process watches its mount table
// (oslock.WatchMounts: a holder's path watch starts it).
func watchingMounts() bool {
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if dst, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasSuffix(dst, "/mountinfo") {
			return true
		}
	}
	return false
}

func TestCancelLeavesNothingBehind(t *testing.T) {
	defer goleak.VerifyNone(t, ignoreSentinel...)
	l, _ := testLocker(t)
	ctx := testCtx(t)
	lead, err := l.Acquire(ctx, "c", Request{})
	if err != nil {
		t.Fatal(err)
	}
	// The holder's path watch, armed PathWatchDelay into the term, opens
	// the process's mount-table watch (kept once made): count after it.
	proctest.Eventually(t, "holder's path watch armed", watchingMounts)
	fds := openFDs(t)
	for i := 0; i < 20; i++ {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := l.Acquire(wctx, "c", Request{})
			done <- err
		}()
		proctest.Eventually(t, "waiter queued", func() bool { return len(pending(t, l, "c")) == 1 })
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled Acquire returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("cancelled Acquire did not return")
		}
		if got := pending(t, l, "c"); len(got) != 0 {
			t.Fatalf("ticket left behind: %v", got)
		}
	}
	// A leak is more descriptors after. Fewer is an earlier test's
	// Locker finishing its teardown meanwhile (its goroutines close
	// their descriptors after Close returns), which CI met under load.
	if got := openFDs(t); got > fds {
		t.Fatalf("fd leak: %d open before, %d after", fds, got)
	}
	// Timeouts too, with the deadline as the cause.
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := l.Acquire(tctx, "c", Request{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timed-out Acquire returned %v", err)
	}
	if err := lead.Release(); err != nil {
		t.Fatal(err)
	}
	if err := lead.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if !errors.Is(lead.Err(), ErrReleased) {
		t.Fatalf("Err after Release = %v", lead.Err())
	}
	l.Close()
}

func TestEpochSurvivesWipedState(t *testing.T) {
	l, dir := testLocker(t)
	ctx := testCtx(t)
	var last uint64
	for i := 0; i < 3; i++ {
		lead, err := l.Acquire(ctx, "e", Request{})
		if err != nil {
			t.Fatal(err)
		}
		if lead.Epoch() <= last {
			t.Fatalf("epoch %d after %d", lead.Epoch(), last)
		}
		last = lead.Epoch()
		lead.Release()
		// A reboot wiping tmpfs loses the state file.
		if err := os.Remove(dir + "/e" + stateSuffix); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFlockCommandExcludes(t *testing.T) {
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("flock(1) not installed")
	}
	l, dir := testLocker(t)
	ctx := testCtx(t)
	// flock(1) holding the documented lock file keeps us out...
	// -o: the lock is not passed on to sleep, so killing flock frees it.
	// Its own group holds flock and its sleep: the cleanup ends both.
	p := proctest.Start(t, "flock(1)", exec.Command(flock, "-o", layout.LockPath(dir, "f"), "sleep", "30"), proctest.Options{Setpgid: true})
	proctest.Eventually(t, "flock(1) holds the lock", func() bool {
		s, err := l.Query(ctx, "f")
		return err == nil && len(s.Held) == 1 && s.Held[0].External
	})
	if _, ok, err := l.TryAcquire(ctx, "f", Exclusive); ok || err != nil {
		t.Fatalf("TryAcquire beside flock(1): ok=%v err=%v", ok, err)
	}
	got := make(chan *Leadership, 1)
	go func() {
		lead, err := l.Acquire(ctx, "f", Request{})
		if err != nil {
			t.Error(err)
		}
		got <- lead
	}()
	select {
	case <-got:
		t.Fatal("granted while flock(1) holds the lock")
	case <-time.After(50 * time.Millisecond):
	}
	// ...and its exit lets us in, woken by the close event.
	p.SignalGroup(syscall.SIGKILL) // flock and its sleep, which has no lock (-o)
	p.Wait()
	var lead *Leadership
	select {
	case lead = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("not granted after flock(1) exited")
	}
	// While we lead, flock(1) -n is refused.
	out, err := exec.Command(flock, "-n", layout.LockPath(dir, "f"), "true").CombinedOutput()
	if err == nil {
		t.Fatalf("flock -n succeeded while we lead: %s", out)
	}
	lead.Release()
}

func TestElectorRolesAndAbdicate(t *testing.T) {
	defer goleak.VerifyNone(t, ignoreSentinel...)
	l, _ := testLocker(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	var mu sync.Mutex
	var roles []string
	e := &Elector{Backend: l, Name: "el", Requeue: true, OnRole: func(r Role, _ *Leadership) {
		mu.Lock()
		roles = append(roles, r.String())
		mu.Unlock()
	}}
	terms := make(chan uint64, 10)
	done := make(chan error, 1)
	go func() {
		done <- e.Run(ctx, func(ctx context.Context, lead *Leadership) error {
			terms <- lead.Epoch()
			<-ctx.Done()
			return context.Cause(ctx)
		})
	}()
	first := <-terms
	e.Abdicate()
	second := <-terms // requeued at the tail, and alone, so leads again
	if second <= first {
		t.Fatalf("epochs %d then %d", first, second)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(roles, ","); got != "follower,leader,follower,leader,stopped" {
		t.Fatalf("roles: %s", got)
	}
}

func TestInvalidRequests(t *testing.T) {
	l, _ := testLocker(t)
	ctx := testCtx(t)
	for _, req := range []Request{
		{Steal: true, IfAvailable: true},
		{Steal: true, Mode: Shared},
		{KillAfter: time.Second},
		{Mode: Mode(7)},
	} {
		if _, err := l.Acquire(ctx, "r", req); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%+v: got %v", req, err)
		}
	}
}

// ignoreSentinel leaves out the process's one inotify reader and its one
// mount table watch, which live as long as the process once a holder
// watched its lock file.
var ignoreSentinel = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/leaderrun/leaderrun/oslock.readSentinel"),
	goleak.IgnoreAnyFunction("github.com/leaderrun/leaderrun/oslock.readMounts"),
}
