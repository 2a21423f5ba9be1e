package elect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/proctest"
	"github.com/leaderrun/leaderrun/oslock"
)

// A waiter stopped at the head of the line (Ctrl-Z, a debugger) is passed
// once the lock is free, and keeps its place: when it runs again it is
// served before those who joined after it.
func TestStoppedWaiterIsPassed(t *testing.T) {
	l, dir := testLocker(t)
	ps := joinInOrder(t, l, dir, "pass", 4)
	h, w1, w2, w3 := ps[0], ps[1], ps[2], ps[3]
	h.Expect("leader")
	w1.Signal(syscall.SIGSTOP)
	proctest.Eventually(t, "w1 shown as stopped", func() bool { return stateOf(t, l, "pass", w1.PID()) == "stopped" })
	h.Send("release")
	w2.Expect("leader") // w1 is passed, not waited for
	w1.Signal(syscall.SIGCONT)
	proctest.Eventually(t, "w1 shown as running", func() bool { return stateOf(t, l, "pass", w1.PID()) == "running" })
	w2.Send("release")
	w1.Expect("leader") // its place: ahead of w3
	w3.Quiet(50 * time.Millisecond)
	w1.Send("release")
	w3.Expect("leader")
}

// A stopped waiter that is not at the head of the line stalls nobody
// either: the one behind it passes it when its turn comes.
func TestStoppedSecondWaiterIsPassed(t *testing.T) {
	l, dir := testLocker(t)
	ps := joinInOrder(t, l, dir, "pass2", 4)
	h, w1, w2, w3 := ps[0], ps[1], ps[2], ps[3]
	h.Expect("leader")
	w2.Signal(syscall.SIGSTOP)
	h.Send("release")
	w1.Expect("leader")
	w1.Send("release")
	w3.Expect("leader")
	w2.Signal(syscall.SIGCONT)
	w3.Send("release")
	w2.Expect("leader")
}

// Any number of stopped waiters ahead, stopped after the live one behind
// them went to sleep, stall nobody when the holder releases (its release
// nudges the first running waiter behind them) or is SIGKILLed (no one
// nudges then in the library: the two next in line are stopped, which is
// the documented limit, so here only one is); they keep their places.
func TestStoppedWaitersAhead(t *testing.T) {
	t.Run("three stopped, holder releases", func(t *testing.T) {
		l, dir := testLocker(t)
		ps := joinInOrder(t, l, dir, "many", 5)
		h, w1, w2, w3, live := ps[0], ps[1], ps[2], ps[3], ps[4]
		h.Expect("leader")
		for _, w := range []*proctest.Proc{w1, w2, w3} {
			w.Signal(syscall.SIGSTOP)
			proctest.Eventually(t, "stopped", func() bool { return stateOf(t, l, "many", w.PID()) == "stopped" })
		}
		h.Send("release")
		live.Expect("leader")
		for _, w := range []*proctest.Proc{w1, w2, w3} {
			w.Signal(syscall.SIGCONT)
		}
		live.Send("release")
		w1.Expect("leader")
		w1.Send("release")
		w2.Expect("leader")
		w2.Send("release")
		w3.Expect("leader")
	})
	t.Run("head stopped, holder killed", func(t *testing.T) {
		l, dir := testLocker(t)
		ps := joinInOrder(t, l, dir, "killed", 3)
		h, w1, live := ps[0], ps[1], ps[2]
		h.Expect("leader")
		w1.Signal(syscall.SIGSTOP)
		proctest.Eventually(t, "stopped", func() bool { return stateOf(t, l, "killed", w1.PID()) == "stopped" })
		h.Signal(syscall.SIGKILL)
		live.Expect("leader")
		w1.Signal(syscall.SIGCONT)
		live.Send("release")
		w1.Expect("leader")
	})
}

func stateOf(t *testing.T, l *Locker, name string, pid int) string {
	s, err := l.Query(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range s.Pending {
		if p.PID == pid {
			return p.State
		}
	}
	for _, h := range s.Held {
		if h.PID == pid {
			return h.State
		}
	}
	return ""
}

// Waiting takes no inotify instance, and holding at most one per process
// (to learn at once of a removed lock file): the per-user limit (128 by
// default) is shared with the user's editors and file managers.
func TestNoInotifyInstance(t *testing.T) {
	l, dir := testLocker(t)
	ps := joinInOrder(t, l, dir, "ino", 4)
	ps[0].Expect("leader")
	for i, p := range ps {
		most := 0 // a waiter
		if i == 0 {
			most = 1 // the holder
		}
		if n := inotifyFDs(t, p.PID()); n > most {
			t.Errorf("pid %d (%d in line) holds %d inotify instances", p.PID(), i, n)
		}
	}
	for i, p := range ps {
		if i > 0 {
			p.Expect("leader")
		}
		p.Send("release")
	}
}

func inotifyFDs(t *testing.T, pid int) int {
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	n := 0
	for _, fd := range fds {
		if link, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name()); err == nil && strings.Contains(link, "inotify") {
			n++
		}
	}
	return n
}

// A steal that gives up after deposing the holder says so, and while it
// is pending Query shows the holder as the leaderrun holder it is.
func TestAbandonedStealIsReported(t *testing.T) {
	l, dir := testLocker(t)
	h := spawn(t, dir, "ab", "T_HOLD=1")
	e0 := epochOf(t, h.Expect("leader"))
	s := spawn(t, dir, "ab", "T_STEAL=1", "T_TIMEOUT=1s")
	h.Expect("lost " + ErrStolen.Error())
	snap, err := l.Query(context.Background(), "ab")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Held) != 1 || snap.Held[0].External || snap.Held[0].Epoch != e0 || snap.Held[0].Since.IsZero() {
		t.Fatalf("holder during a pending steal: %+v", snap.Held)
	}
	if line := s.Expect("abandoned"); !strings.Contains(line, ErrStealAbandoned.Error()) {
		t.Fatalf("stealer said %q", line)
	}
}

// A waiting steal (behind another steal) deposes nobody.
func TestQueuedStealDeposesNobody(t *testing.T) {
	_, dir := testLocker(t)
	h := spawn(t, dir, "qs", "T_HOLD=1")
	h.Expect("leader")
	s1 := spawn(t, dir, "qs", "T_STEAL=1")
	h.Expect("lost")
	// s1 now waits for h; a second stealer waits behind s1 and must not
	// depose s1 once s1 is granted.
	s2 := spawn(t, dir, "qs", "T_STEAL=1", "T_TIMEOUT=300ms")
	s2.Expect("timeout")
	h.Signal(syscall.SIGKILL)
	h.Wait()
	s1.Expect("leader")
	s1.Quiet(100 * time.Millisecond) // not deposed by the abandoned s2
	s1.Send("release")
}

// The lock file removed under a live holder never lets a second leader in:
// a newcomer takes the new file at the path but waits in line behind the
// holder's ticket, and leads once the holder is done.
func TestLockFileRemovedUnderHolder(t *testing.T) {
	_, dir := testLocker(t)
	h := spawn(t, dir, "rm", "T_HOLD=1") // keeps the old file's lock after its term ends
	h.Expect("leader")
	if err := os.Remove(filepath.Join(dir, "rm.lock")); err != nil {
		t.Fatal(err)
	}
	h.Expect("lost " + ErrLockLost.Error())
	c := spawn(t, dir, "rm")
	c.Quiet(150 * time.Millisecond)
	h.Signal(syscall.SIGKILL)
	h.Wait()
	c.Expect("leader")
	// c leads on the file at the path, so flock(1) on it is excluded.
	f, err := os.Open(filepath.Join(dir, "rm.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ok, err := oslock.TryLock(f, true); err != nil || ok {
		t.Fatalf("lock file at the path is free while c leads (ok %v, err %v)", ok, err)
	}
	c.Send("release")
}

// The queue directory removed under a holder and its waiter (a cleaner,
// an rm -rf) strands nobody: the waiter puts its ticket back under its
// number and leads after the holder.
func TestQueueRemovedUnderWaiters(t *testing.T) {
	l, dir := testLocker(t)
	ps := joinInOrder(t, l, dir, "rq", 3)
	ps[0].Expect("leader")
	// A waiter takes its place (notes who is ahead) a moment after its
	// ticket is linked; one whose queue is removed within that moment is
	// put back in the order the waiters wake, which is not tested here.
	ps[2].Quiet(20 * time.Millisecond)
	if err := os.RemoveAll(filepath.Join(dir, "rq.queue")); err != nil {
		t.Fatal(err)
	}
	ps[0].Send("release")
	ps[1].Expect("leader")
	ps[1].Send("release")
	ps[2].Expect("leader")
	ps[2].Send("release")
}

// The whole lock directory replaced under a waiter: new requests join the
// directory now at the path.
func TestLockerFollowsReplacedDir(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "locks")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lead, err := l.Acquire(testCtx(t), "d", Request{})
	if err != nil {
		t.Fatal(err)
	}
	lead.Release()
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	lead, err = l.Acquire(testCtx(t), "d", Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Release()
	if _, err := os.Stat(filepath.Join(dir, "d.lock")); err != nil {
		t.Fatalf("the second request did not join the directory at the path: %v", err)
	}
}

// Close ends a waiting Acquire at once with ErrClosed, and later calls
// fail with it too.
func TestCloseEndsWaitingAcquire(t *testing.T) {
	l, dir := testLocker(t)
	h := spawn(t, dir, "cl")
	h.Expect("leader")
	l2, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := l2.Acquire(testCtx(t), "cl", Request{})
		errc <- err
	}()
	proctest.Eventually(t, "second request queued", func() bool { return len(pending(t, l, "cl")) == 1 })
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if err != ErrClosed {
			t.Fatalf("waiting Acquire returned %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the waiting Acquire")
	}
	if _, err := l2.Acquire(testCtx(t), "cl", Request{}); err != ErrClosed {
		t.Fatalf("Acquire after Close: %v", err)
	}
	if got := pending(t, l, "cl"); len(got) != 0 {
		t.Fatalf("closed request left a ticket: %v", got)
	}
	h.Send("release")
}

// The state file wiped while the wall clock is behind the last epoch (it
// was set back, or the last epochs came from a faster clock): the floor
// kept in the lock file keeps epochs growing.
func TestEpochFloorSurvivesWipeWithClockBehind(t *testing.T) {
	l, dir := testLocker(t)
	ctx := testCtx(t)
	ahead := uint64(time.Now().Add(time.Hour).UnixMicro())
	if err := os.WriteFile(filepath.Join(dir, "f"+stateSuffix), fmt.Appendf(nil, stateFormat, 7, ahead), 0o600); err != nil {
		t.Fatal(err)
	}
	lead, err := l.Acquire(ctx, "f", Request{})
	if err != nil {
		t.Fatal(err)
	}
	first := lead.Epoch()
	lead.Release()
	if first != ahead+1 {
		t.Fatalf("epoch %d, want %d", first, ahead+1)
	}
	for _, wipe := range []func() error{
		func() error { return os.Remove(filepath.Join(dir, "f"+stateSuffix)) },
		func() error { return os.Truncate(filepath.Join(dir, "f"+stateSuffix), 0) },
	} {
		if err := wipe(); err != nil {
			t.Fatal(err)
		}
		lead, err := l.Acquire(ctx, "f", Request{})
		if err != nil {
			t.Fatal(err)
		}
		if lead.Epoch() <= first {
			t.Fatalf("epoch went back from %d to %d after the state was wiped", first, lead.Epoch())
		}
		first = lead.Epoch()
		lead.Release()
	}
}

// The state file removed under a live queue: the ticket counter continues
// after the queue's tickets, so a newcomer neither jumps the line nor
// takes a number a waiter holds.
func TestStateRemovedUnderQueue(t *testing.T) {
	l, dir := testLocker(t)
	ps := joinInOrder(t, l, dir, "sq", 2)
	ps[0].Expect("leader")
	if err := os.Remove(filepath.Join(dir, "sq"+stateSuffix)); err != nil {
		t.Fatal(err)
	}
	c := joinInOrder(t, l, dir, "sq", 1)[0]
	ps[0].Send("release")
	ps[1].Expect("leader")
	c.Quiet(50 * time.Millisecond)
	ps[1].Send("release")
	c.Expect("leader")
	c.Send("release")
}

// A holder learns at once that its lock file is no longer the one at the
// path (removed, or its directory moved away): its term ends with
// ErrLockLost, and a newcomer leads on the file at the path once the old
// holder has let go.
func TestHolderLearnsLockLost(t *testing.T) {
	for _, how := range []string{"remove file", "move directory"} {
		t.Run(how, func(t *testing.T) {
			base := t.TempDir()
			dir := filepath.Join(base, "locks")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			h := spawn(t, dir, "lost")
			h.Expect("leader")
			if how == "remove file" {
				if err := os.Remove(filepath.Join(dir, "lost.lock")); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := os.Rename(dir, dir+".old"); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if line := h.Expect("lost"); !strings.Contains(line, ErrLockLost.Error()) {
				t.Fatalf("holder said %q", line)
			}
			h.Expect("released")
			c := spawn(t, dir, "lost")
			c.Expect("leader")
			c.Send("release")
		})
	}
}

// Elector.Run tells a stop before any grant (ErrNeverLed, with the
// context's cause) from a clean stop after leading (nil).
func TestElectorRunNeverLed(t *testing.T) {
	l, dir := testLocker(t)
	h := spawn(t, dir, "nl")
	h.Expect("leader")
	ctx, cancel := context.WithTimeout(testCtx(t), 100*time.Millisecond)
	defer cancel()
	err := (&Elector{Backend: l, Name: "nl"}).Run(ctx, func(context.Context, *Leadership) error { return nil })
	if !errors.Is(err, ErrNeverLed) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run that never led returned %v", err)
	}
	h.Send("release")
	h.Expect("released")
	ctx2, cancel2 := context.WithCancel(testCtx(t))
	err = (&Elector{Backend: l, Name: "nl", Requeue: true}).Run(ctx2, func(ctx context.Context, _ *Leadership) error {
		cancel2()
		<-ctx.Done()
		return nil
	})
	if err != nil {
		t.Fatalf("Run stopped after leading returned %v", err)
	}
}

// Request.StealStopped recovers the name from a holder stopped that long:
// it is deposed and killed, and the waiter at the head of the line leads.
// A running holder is never touched.
func TestStealStoppedHolder(t *testing.T) {
	_, dir := testLocker(t)
	h := spawn(t, dir, "ss", "T_HOLD=1")
	h.Expect("leader")
	w := spawn(t, dir, "ss", "T_STEALSTOPPED=200ms")
	w.Quiet(400 * time.Millisecond) // a running holder keeps the lock
	h.Signal(syscall.SIGSTOP)
	w.Expect("leader")
	h.Wait()
	if ws, ok := h.Cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the stopped holder should have been killed: %v", h.Cmd.ProcessState)
	}
	w.Send("release")
}

// Two holders of directories that were at the path one after the other
// reach their grants together: the second waits for the first's claim,
// even though the first made it a moment before (the first is held right
// after its claim step while the directory is replaced).
func TestReplacedDirGrantWaitsForClaim(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("claims are Linux's")
	}
	la, dir := testLocker(t)
	reached, hold := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	var unhold sync.Once
	testAfterClaim = func(string) {
		if once.CompareAndSwap(false, true) {
			close(reached)
			<-hold
		}
	}
	defer func() { testAfterClaim = nil }()
	let := func() { unhold.Do(func() { close(hold) }) }
	defer let() // before the Lockers close (at cleanup), which wait for the first request
	ctx := testCtx(t)
	granted := make(chan *Leadership, 1)
	go func() {
		lead, err := la.Acquire(ctx, "r", Request{})
		if err != nil {
			t.Error(err)
		}
		granted <- lead
	}()
	select {
	case <-reached:
	case <-ctx.Done():
		t.Fatal("the first request never reached its grant")
	}
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	lb := openLocker(t, dir)
	// The first is granted in the old directory; the second, in the new
	// one, must not be granted beside it.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	lead, err := lb.Acquire(short, "r", Request{})
	cancel()
	switch {
	case err == nil:
		lead.Release()
		t.Error("granted in the new directory while the old one's holder was being granted")
	case !errors.Is(err, context.DeadlineExceeded):
		t.Errorf("the second request: %v, want it to wait", err)
	}
	let()
	first := <-granted
	if first == nil || t.Failed() {
		t.FailNow()
	}
	first.Release()
	lead, err = lb.Acquire(ctx, "r", Request{})
	if err != nil {
		t.Fatalf("after the first released: %v", err)
	}
	lead.Release()
}
