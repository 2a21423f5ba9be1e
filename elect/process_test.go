package elect

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

func epochOf(t *testing.T, line string) uint64 {
	t.Helper()
	e, err := strconv.ParseUint(strings.TrimPrefix(line, "leader "), 10, 64)
	if err != nil {
		t.Fatalf("bad leader line %q", line)
	}
	return e
}

// joinInOrder starts n contenders one after another, each only once the
// previous one is visible in the queue, so that their join order is known.
func joinInOrder(t *testing.T, l *Locker, dir, name string, n int, extra ...string) []*proctest.Proc {
	var ps []*proctest.Proc
	for i := 0; i < n; i++ {
		p := spawn(t, dir, name, extra...)
		ps = append(ps, p)
		proctest.Eventually(t, "contender queued", func() bool {
			return slices.Contains(pending(t, l, name), p.PID()) || slices.Contains(holders(t, l, name), p.PID())
		})
	}
	return ps
}

func holderPID(t *testing.T, l *Locker, name string) int {
	s, err := l.Query(context.Background(), name)
	if err != nil || len(s.Held) == 0 {
		return 0
	}
	return s.Held[0].PID
}

func TestSixContendersOneLeader(t *testing.T) {
	l, dir := testLocker(t)
	ps := joinInOrder(t, l, dir, "six", 6)
	ps[0].Expect("leader")
	for _, p := range ps[1:] {
		p.Quiet(50 * time.Millisecond)
	}
	s, err := l.Query(testCtx(t), "six")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Held) != 1 || s.Held[0].PID != ps[0].PID() || len(s.Pending) != 5 {
		t.Fatalf("want 1 holder (pid %d) and 5 pending, got %+v", ps[0].PID(), s)
	}
}

func TestKillLeaderNextTicketLeads(t *testing.T) {
	l, dir := testLocker(t)
	ps := joinInOrder(t, l, dir, "kill", 3)
	e0 := epochOf(t, ps[0].Expect("leader"))
	ps[0].Signal(syscall.SIGKILL)
	ps[0].Wait()
	e1 := epochOf(t, ps[1].Expect("leader"))
	ps[2].Quiet(50 * time.Millisecond)
	ps[1].Signal(syscall.SIGKILL)
	ps[1].Wait()
	e2 := epochOf(t, ps[2].Expect("leader"))
	if !(e0 < e1 && e1 < e2) {
		t.Fatalf("epochs must strictly increase across crashes: %d %d %d", e0, e1, e2)
	}
}

func TestFIFOFiftyStaggeredJoiners(t *testing.T) {
	if testing.Short() {
		t.Skip("50 processes; skipped with -short")
	}
	l, dir := testLocker(t)
	ps := joinInOrder(t, l, dir, "fifo", 50)
	var last uint64
	for i, p := range ps {
		e := epochOf(t, p.Expect("leader"))
		if e <= last {
			t.Fatalf("contender %d: epoch %d after %d", i, e, last)
		}
		last = e
		if i+1 < len(ps) {
			// Nobody but the next in line may lead now.
			if h := holderPID(t, l, "fifo"); h != p.PID() {
				t.Fatalf("contender %d leads but the holder is pid %d", i, h)
			}
		}
		p.Send("release")
		p.Expect("released")
		p.Wait()
	}
}

func TestSharedAndExclusiveInterleave(t *testing.T) {
	l, dir := testLocker(t)
	sh := []string{"T_MODE=shared"}
	s1 := joinInOrder(t, l, dir, "rw", 2, sh...) // granted together
	x := joinInOrder(t, l, dir, "rw", 1)[0]      // waits for both
	s2 := joinInOrder(t, l, dir, "rw", 2, sh...) // wait behind x: no writer starvation
	s1[0].Expect("leader")
	s1[1].Expect("leader")
	x.Quiet(50 * time.Millisecond)
	s2[0].Quiet(0)
	s2[1].Quiet(0)
	s1[0].Send("release")
	s1[0].Expect("released")
	x.Quiet(50 * time.Millisecond)
	s1[1].Send("release")
	s1[1].Expect("released")
	x.Expect("leader")
	s2[0].Quiet(50 * time.Millisecond)
	x.Send("release")
	x.Expect("released")
	s2[0].Expect("leader")
	s2[1].Expect("leader")
}

func TestTryOnly(t *testing.T) {
	l, dir := testLocker(t)
	p := spawn(t, dir, "try", "T_TRY=1")
	p.Expect("leader")
	q := spawn(t, dir, "try", "T_TRY=1")
	q.Expect("busy")
	if code := q.Wait(); code != 3 {
		t.Fatalf("exit %d", code)
	}
	if got := pending(t, l, "try"); len(got) != 0 {
		t.Fatalf("a try-only request must never stay queued: %v", got)
	}
}

func TestTimeoutLeavesNothing(t *testing.T) {
	l, dir := testLocker(t)
	holder := spawn(t, dir, "to")
	holder.Expect("leader")
	w := spawn(t, dir, "to", "T_TIMEOUT=200ms")
	w.Expect("timeout")
	w.Wait()
	names, err := l.dir.Names()
	if err != nil {
		t.Fatal(err)
	}
	q, err := l.dir.Sub("to"+queueSuffix, false, defaultSubOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	left, _ := q.Names()
	if len(ticketsOf(t, left)) != 1 {
		t.Fatalf("queue should hold only the holder's ticket, has %v (dir %v)", left, names)
	}
}

func TestStaleTicketsCleaned(t *testing.T) {
	l, dir := testLocker(t)
	ps := joinInOrder(t, l, dir, "stale", 4)
	ps[0].Expect("leader")
	// Kill two waiters: their tickets stay until someone meets them.
	ps[1].Signal(syscall.SIGKILL)
	ps[2].Signal(syscall.SIGKILL)
	ps[1].Wait()
	ps[2].Wait()
	if got := pending(t, l, "stale"); !slices.Equal(got, []int{ps[3].PID()}) {
		t.Fatalf("query must hide dead waiters: %v", got)
	}
	ps[0].Send("release")
	ps[3].Expect("leader")
	// A release unlinks its FIFOs' names after the hang-up that wakes
	// the successor: look once it has returned.
	ps[0].Expect("released")
	q, _ := l.dir.Sub("stale"+queueSuffix, false, defaultSubOpts)
	defer q.Close()
	left, _ := q.Names()
	if len(ticketsOf(t, left)) != 1 {
		t.Fatalf("dead tickets not cleaned: %v", left)
	}
}

func TestStealWaitsForRelease(t *testing.T) {
	l, dir := testLocker(t)
	h := spawn(t, dir, "st", "T_HOLD=1")
	h.Expect("leader")
	w := joinInOrder(t, l, dir, "st", 1)[0]
	s := spawn(t, dir, "st", "T_STEAL=1")
	h.Expect("lost " + ErrStolen.Error())
	// The stolen holder keeps the kernel lock: the stealer waits.
	s.Quiet(100 * time.Millisecond)
	h.Signal(syscall.SIGKILL)
	h.Wait()
	s.Expect("leader")
	w.Quiet(50 * time.Millisecond)
	s.Send("release")
	w.Expect("leader") // the queue kept its order behind the stealer
}

func TestStealKillsAfterGrace(t *testing.T) {
	_, dir := testLocker(t)
	h := spawn(t, dir, "sk", "T_HOLD=1")
	h.Expect("leader")
	h.Signal(syscall.SIGSTOP) // a suspended holder does not let go by itself
	s := spawn(t, dir, "sk", "T_STEAL=1", "T_KILLAFTER=100ms")
	s.Expect("leader")
	h.Wait()
	if ws, ok := h.Cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("holder should have been killed: %v", h.Cmd.ProcessState)
	}
}

func TestStealReleasingHolder(t *testing.T) {
	_, dir := testLocker(t)
	h := spawn(t, dir, "sr")
	e0 := epochOf(t, h.Expect("leader"))
	s := spawn(t, dir, "sr", "T_STEAL=1")
	h.Expect("lost " + ErrStolen.Error())
	h.Expect("released")
	if e := epochOf(t, s.Expect("leader")); e <= e0 {
		t.Fatalf("stealer's epoch %d not above %d", e, e0)
	}
}

func TestStoppedHolderShowsStopped(t *testing.T) {
	l, dir := testLocker(t)
	h := spawn(t, dir, "stop")
	h.Expect("leader")
	h.Signal(syscall.SIGSTOP)
	proctest.Eventually(t, "holder shown as stopped", func() bool {
		s, err := l.Query(context.Background(), "stop")
		return err == nil && len(s.Held) == 1 && s.Held[0].State == "stopped"
	})
	h.Signal(syscall.SIGCONT)
	proctest.Eventually(t, "holder shown as running", func() bool {
		s, err := l.Query(context.Background(), "stop")
		return err == nil && len(s.Held) == 1 && s.Held[0].State == "running"
	})
}

// ticketsOf returns the tickets among a queue directory's names, checking
// that each has its beacon and that nothing else is there.
func ticketsOf(t *testing.T, names []string) []string {
	t.Helper()
	var tickets []string
	for _, n := range names {
		if _, ok := parseTicket(n); ok {
			tickets = append(tickets, n)
			if !slices.Contains(names, n+beaconSuffix) || !slices.Contains(names, n+inboxSuffix) {
				t.Errorf("ticket %s has no beacon or inbox (queue %v)", n, names)
			}
		}
	}
	if len(names) != 3*len(tickets) {
		t.Errorf("queue holds more than tickets and their beacons: %v", names)
	}
	return tickets
}
