package bus

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

func field(t *testing.T, line string, i int) uint64 {
	t.Helper()
	f := strings.Fields(line)
	if i >= len(f) {
		t.Fatalf("line %q has no field %d", line, i)
	}
	n, err := strconv.ParseUint(f[i], 10, 64)
	if err != nil {
		t.Fatalf("line %q field %d: %v", line, i, err)
	}
	return n
}

// TestMultiProcess runs a leader and members as separate processes: five
// members and the leader publish and all see one order; a member that
// stops reading is cut off while the others go on; the leader is killed
// with SIGKILL while handling a request, and the members follow the next
// leader, which has a higher epoch, and see the gap.
func TestMultiProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test skipped in -short mode")
	}
	r := &multiRun{t: t, ctx: testCtx(t, 50*time.Second)}
	r.env = []string{"BUS_DIR=" + t.TempDir(), "BUS_QUEUE=4096"}

	a, epochA := r.startLeader("leader A")
	members, slow := r.startMembers(a, epochA)
	r.publishInOneOrder(a, members, slow, epochA)
	r.slowCutOff(slow, epochA)
	b, epochB := r.killInRequest(a, epochA, members)
	r.noBacklog(b, epochB, members, slow)
}

// multiRun is TestMultiProcess's state: its deadline and the environment
// of every process.
type multiRun struct {
	t   *testing.T
	ctx context.Context
	env []string
}

// startLeader starts a leader and returns it once it leads, with its epoch.
func (r *multiRun) startLeader(name string) (*proctest.Proc, uint64) {
	p := startRole(r.t, name, "leader", r.env)
	line, _ := p.WaitPrefix(r.ctx, 0, "leading ")
	return p, field(r.t, line, 1)
}

// startMembers starts five members and a slow one, and checks that each
// follows leader a without a gap.
func (r *multiRun) startMembers(a *proctest.Proc, epochA uint64) (members []*proctest.Proc, slow *proctest.Proc) {
	t := r.t
	for i := range 5 {
		members = append(members, startRole(t, fmt.Sprintf("member %d", i), "member", r.env))
	}
	slow = startRole(t, "slow member", "member", r.env)
	for _, m := range append(members, slow) {
		line, _ := m.WaitPrefix(r.ctx, 0, "leader ")
		if field(t, line, 1) != epochA || field(t, line, 2) != uint64(a.PID()) || !strings.HasSuffix(line, " false") {
			t.Fatalf("%s: %q, want leader %d (pid %d) without a gap", m.Name, line, epochA, a.PID())
		}
	}
	return members, slow
}

// publishInOneOrder stops the slow member reading altogether; the members
// and leader a publish, and every member that keeps up sees all of it in
// one order without losing its connection.
func (r *multiRun) publishInOneOrder(a *proctest.Proc, members []*proctest.Proc, slow *proctest.Proc, epochA uint64) {
	t, ctx := r.t, r.ctx
	if err := slow.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	const perMember, byLeader = 200, 12000
	for _, m := range members {
		send(t, m, "publish "+strconv.Itoa(perMember))
	}
	send(t, a, "publish "+strconv.Itoa(byLeader))
	for _, m := range members {
		m.WaitPrefix(ctx, 0, "published")
	}
	a.WaitPrefix(ctx, 0, "published")
	total := len(members)*perMember + byLeader
	var want string
	for _, m := range members {
		send(t, m, fmt.Sprintf("await %d", total))
		line, _ := m.WaitPrefix(ctx, 0, "have ")
		if field(t, line, 1) != epochA || field(t, line, 2) != uint64(total) {
			t.Fatalf("%s: %q, want %d messages of epoch %d", m.Name, line, total, epochA)
		}
		digest := strings.Fields(line)[3]
		if want == "" {
			want = digest
		} else if digest != want {
			t.Fatalf("%s saw another order (digest %s, first member %s)", m.Name, digest, want)
		}
		if n := m.Count("lost "); n != 0 {
			t.Fatalf("%s lost its connection while keeping up", m.Name)
		}
	}
}

// slowCutOff resumes the slow member, which must have been cut off and
// come back to the same leader, told of the gap.
func (r *multiRun) slowCutOff(slow *proctest.Proc, epochA uint64) {
	t, ctx := r.t, r.ctx
	if err := slow.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	lost, at := slow.WaitPrefix(ctx, 0, "lost ")
	t.Logf("slow member: %s", lost)
	if !strings.Contains(lost, "slow consumer") && !strings.Contains(lost, "without a reason") {
		t.Fatalf("slow member: %q, want it cut off", lost)
	}
	back, _ := slow.WaitPrefix(ctx, at, "leader ")
	if field(t, back, 1) != epochA || !strings.HasSuffix(back, " true") {
		t.Fatalf("slow member back with %q, want epoch %d and a gap", back, epochA)
	}
}

// killInRequest queues leader B for the lock and kills leader a with
// SIGKILL in the middle of a request: the request fails with "leader
// changed", every member follows B (a higher epoch, with a gap), and B
// answers a new request.
func (r *multiRun) killInRequest(a *proctest.Proc, epochA uint64, members []*proctest.Proc) (*proctest.Proc, uint64) {
	t, ctx := r.t, r.ctx
	b := startRole(t, "leader B", "leader", r.env)
	send(t, members[0], "request block")
	a.WaitPrefix(ctx, 0, "blocking")
	marks := make([]int, len(members))
	for i, m := range members {
		marks[i] = len(m.Lines())
	}
	if err := a.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	lineB, _ := b.WaitPrefix(ctx, 0, "leading ")
	epochB := field(t, lineB, 1)
	if epochB <= epochA {
		t.Fatalf("leader B has epoch %d, not above A's %d", epochB, epochA)
	}
	if line, _ := members[0].WaitPrefix(ctx, marks[0], "reqerr "); !strings.Contains(line, "leader changed") {
		t.Fatalf("request across the leader change: %q", line)
	}
	for i, m := range members {
		_, at := m.WaitPrefix(ctx, marks[i], "lost ")
		line, _ := m.WaitPrefix(ctx, at, "leader ")
		if field(t, line, 1) != epochB || field(t, line, 2) != uint64(b.PID()) || !strings.HasSuffix(line, " true") {
			t.Fatalf("%s: %q, want leader %d (pid %d) with a gap", m.Name, line, epochB, b.PID())
		}
	}
	send(t, members[0], "request hi")
	if line, _ := members[0].WaitPrefix(ctx, marks[0], "reply "); line != fmt.Sprintf("reply pid:%d:hi", b.PID()) {
		t.Fatalf("request to the new leader: %q", line)
	}
	return b, epochB
}

// noBacklog: the bus keeps no backlog. A member that is not yet connected
// to b when b publishes misses those messages (and is told of the gap);
// the slow member, cut off earlier, may still be reconnecting, so b
// publishes once it is back. Every member then sees b's messages in one
// order.
func (r *multiRun) noBacklog(b *proctest.Proc, epochB uint64, members []*proctest.Proc, slow *proctest.Proc) {
	t, ctx := r.t, r.ctx
	slow.WaitPrefix(ctx, 0, "leader "+strconv.FormatUint(epochB, 10))
	send(t, b, "publish 10")
	var want string
	for i, m := range append(members, slow) {
		send(t, m, fmt.Sprintf("await 10 %d", epochB))
		_, at := m.WaitPrefix(ctx, 0, "leader "+strconv.FormatUint(epochB, 10))
		line, _ := m.WaitPrefix(ctx, at, "have "+strconv.FormatUint(epochB, 10))
		if field(t, line, 2) != 10 {
			t.Fatalf("%s: %q", m.Name, line)
		}
		if i == 0 {
			want = strings.Fields(line)[3]
		} else if d := strings.Fields(line)[3]; d != want {
			t.Fatalf("%s: digest %s, want %s", m.Name, d, want)
		}
	}
	for _, m := range append(members, slow) {
		if n := m.Count("bad "); n != 0 {
			t.Fatalf("%s saw messages out of order", m.Name)
		}
	}
}
