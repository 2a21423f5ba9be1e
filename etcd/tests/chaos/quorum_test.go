package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/etcd/internal/etcdtest"
	drv "github.com/leaderrun/leaderrun/internal/chaos"
	"github.com/leaderrun/leaderrun/internal/proctest"
)

// TestQuorumLossHolder is the chaos test's case of a quorum lost under a
// running holder, made on purpose: host A leads with a COMMAND that
// ignores SIGTERM (so it lives for --grace after its term's deadline),
// two of the three etcd members are stopped for longer than A's renewals
// can bear, then continued, and host B asks for the name. A's term passes
// its deadline (COMMAND gets SIGTERM, SIGKILL --grace later); B must not
// start before
// A's COMMAND is gone: the fenced log and the running flock must show no
// overlap, whatever the order in which quorum returns and A's lease goes.
func TestQuorumLossHolder(t *testing.T) {
	cl, res, start := quorumSetUp(t)
	// --ttl 6s --grace 2s: renewals every second, the term's deadline 3s
	// after the last one acknowledged, SIGKILL 2s after that, and the
	// lease on the server 1s later still.
	logHas := func(kind, host string) bool {
		b, _ := os.ReadFile(filepath.Join(res, "log"))
		for _, s := range strings.Split(string(b), "\n") {
			if r, ok := drv.ParseLine(s); ok && r.Kind == kind && r.Host == host {
				return true
			}
		}
		return false
	}
	a := start("A", 30*time.Second, true)
	proctest.Eventually(t, "A's COMMAND starts", func() bool {
		select {
		case <-a.done:
			t.Fatalf("A exited: %v: %s", a.err, a.out.String())
		default:
		}
		return logHas("S", "A")
	})
	waitRenewed(t, cl)
	stopAt := time.Now()
	for _, m := range cl.Members[:2] {
		m.Signal(syscall.SIGSTOP)
	}
	// A renewed just now: its deadline is 2 to 3s from now, and SIGKILL
	// 2s after it. The outage ends past the deadline, inside the grace.
	time.Sleep(3500 * time.Millisecond)
	for _, m := range cl.Members[:2] {
		m.Signal(syscall.SIGCONT)
	}
	t.Logf("members m0 and m1 stopped for %v", time.Since(stopAt).Round(time.Millisecond))
	// B asks now: a session that lived through the outage would have
	// been lost like A's.
	b := start("B", 100*time.Millisecond, false)
	for _, p := range []struct {
		name string
		*qproc
	}{{"A", a}, {"B", b}} {
		select {
		case <-p.done:
			t.Logf("%s exited: %v: %s", p.name, p.err, p.out.String())
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not exit within 30s of the quorum's return", p.name)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl.WaitHealthy(ctx)
	log, _ := os.ReadFile(filepath.Join(res, "log"))
	var lastA, startB int64
	for _, s := range strings.Split(string(log), "\n") {
		r, ok := drv.ParseLine(s)
		if !ok {
			continue
		}
		switch {
		case r.Kind == "V" || r.Kind == "R":
			t.Errorf("overlap: %s", s)
		case r.Host == "A":
			lastA = r.Nanos
		case r.Host == "B" && r.Kind == "S" && startB == 0:
			startB = r.Nanos
		}
	}
	if startB == 0 {
		t.Errorf("B's COMMAND never started")
	} else {
		t.Logf("A's COMMAND's last write %v after the stop; B's COMMAND's start %v after it (%v after A's last write)",
			time.Duration(lastA-stopAt.UnixNano()).Round(time.Millisecond), time.Duration(startB-stopAt.UnixNano()).Round(time.Millisecond),
			time.Duration(startB-lastA).Round(time.Millisecond))
	}
}

// waitRenewed waits until a lease on cl (A's session) has been renewed,
// as etcd shows it (etcdctl lease timetolive): its remaining TTL, whole
// seconds that count down between renewals, goes up, or does not go down
// over more than a second.
func waitRenewed(t *testing.T, cl *etcdtest.Cluster) {
	t.Helper()
	c := cl.Client(t)
	// A lease's TTL is told in whole seconds, rounded down, so renewals a
	// second apart can show the same number every time. So a renewal is
	// also seen as a TTL that did not drop over more than a second (it
	// drops by at least one without one); the interval is counted from
	// the end of the earlier call to the start of the later one, so that
	// a slow call cannot make it look longer than it was.
	type sample struct {
		ttl int64
		at  time.Time // when the call that read it returned
	}
	low, window := map[clientv3.LeaseID]int64{}, map[clientv3.LeaseID]sample{}
	proctest.Eventually(t, "A's lease renewed", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		ls, err := c.Leases(ctx)
		if err != nil {
			return false
		}
		for _, l := range ls.Leases {
			asked := time.Now()
			r, err := c.TimeToLive(ctx, l.ID)
			if err != nil || r.TTL <= 0 {
				continue
			}
			if m, ok := low[l.ID]; ok && r.TTL > m {
				return true
			}
			if m, ok := low[l.ID]; !ok || r.TTL < m {
				low[l.ID] = r.TTL
			}
			w, ok := window[l.ID]
			switch {
			case !ok:
				window[l.ID] = sample{r.TTL, time.Now()}
			case asked.Sub(w.at) > 1100*time.Millisecond:
				if r.TTL >= w.ttl {
					return true
				}
				window[l.ID] = sample{r.TTL, time.Now()}
			}
		}
		return false
	})
}

// quorumSetUp starts a cluster of three members for a quorum test (closed
// at its end) and returns it, the results' directory and the test's
// starter.
func quorumSetUp(t *testing.T) (*etcdtest.Cluster, string, func(host string, hold time.Duration, stubborn bool) *qproc) {
	if testing.Short() {
		t.Skip("multi-process test over etcd; skipped with -short")
	}
	etcdtest.Require(t)
	cl, err := etcdtest.Start(etcdtest.Options{Members: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	tmp := t.TempDir()
	res := filepath.Join(tmp, "res")
	if err := os.Mkdir(res, 0o700); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return cl, res, starter(t, cl, tmp, res, self)
}

// waitInLine waits until n requests wait in line for the quorum tests'
// name, as `leaderrun-etcd status --json` shows them.
func waitInLine(t *testing.T, cl *etcdtest.Cluster, n int) {
	t.Helper()
	dir := t.TempDir()
	proctest.Eventually(t, fmt.Sprintf("%d waiters in line", n), func() bool {
		out, err := exec.Command(drv.Bin, "status", "chaos", "--json", "--dir", dir, "--etcd-endpoints", strings.Join(cl.Endpoints(), ","), "--etcd-prefix", "/quorum/").Output()
		var snap struct{ Pending []json.RawMessage }
		if err == nil && json.Unmarshal(out, &snap) == nil && len(snap.Pending) == n {
			return true
		}
		time.Sleep(50 * time.Millisecond) // each look starts a process
		return false
	})
}

// qproc is a wrapper of TestQuorumLossHolder; err and out are read once
// done is closed.
type qproc struct {
	done chan struct{}
	err  error
	out  strings.Builder
}

// starter returns how a quorum test starts a wrapper on host (lock
// directory tmp/host<host>, made if missing) whose COMMAND holds for hold,
// ignoring SIGTERM if stubborn.
func starter(t *testing.T, cl *etcdtest.Cluster, tmp, res, self string) func(host string, hold time.Duration, stubborn bool) *qproc {
	return func(host string, hold time.Duration, stubborn bool) *qproc {
		if err := os.Mkdir(filepath.Join(tmp, "host"+host), 0o700); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
		args := []string{"--dir", filepath.Join(tmp, "host"+host), "--host", host, "--name", "chaos", "--ttl", "6s", "--grace", "2s",
			"--dial-timeout", "2s", "--etcd-endpoints", strings.Join(cl.Endpoints(), ","), "--etcd-prefix", "/quorum/",
			"--", self, "-test.run=^$"}
		cmd := exec.Command(drv.Bin, args...)
		cmd.Env = drv.Spec{Res: res, Host: host, Tick: 3 * time.Millisecond, Hold: hold, Stubborn: stubborn}.Env()
		p := &qproc{done: make(chan struct{})}
		cmd.Stdout, cmd.Stderr = &p.out, &p.out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { p.err = cmd.Wait(); close(p.done) }()
		t.Cleanup(func() {
			if cmd.Process.Pid > 1 {
				cmd.Process.Signal(syscall.SIGCONT)
				cmd.Process.Kill()
			}
			<-p.done
			for _, l := range proctest.WithEnv(drv.Marker(res)) {
				if l.PID > 1 {
					syscall.Kill(l.PID, syscall.SIGKILL)
				}
			}
		})
		return p
	}
}

// TestQuorumLossWaiters: the chaos soak's quorum loss with a holder and 20
// waiters. Two of the three members are stopped for 12s, twice the TTL:
// the holder's term ends (exit 80, or 0 if its COMMAND had ended), and
// every waiter, whatever error the client library gives it meanwhile
// (no leader, request timed out, a lease grant's "context deadline
// exceeded" as code Unknown), queues again instead of exiting 70: once
// the quorum is back, each one leads in turn and exits 0, with no overlap.
func TestQuorumLossWaiters(t *testing.T) {
	cl, res, start := quorumSetUp(t)
	a := start("A", 30*time.Second, false)
	proctest.Eventually(t, "A's COMMAND starts", func() bool {
		b, _ := os.ReadFile(filepath.Join(res, "log"))
		for _, s := range strings.Split(string(b), "\n") {
			if r, ok := drv.ParseLine(s); ok && r.Kind == "S" {
				return true
			}
		}
		return false
	})
	const n = 20
	var ws []*qproc
	for i := range n {
		ws = append(ws, start(string(rune('B'+i%2)), 50*time.Millisecond, false))
	}
	waitInLine(t, cl, n)
	for _, m := range cl.Members[:2] {
		m.Signal(syscall.SIGSTOP)
	}
	time.Sleep(12 * time.Second)
	for _, m := range cl.Members[:2] {
		m.Signal(syscall.SIGCONT)
	}
	codes := map[int]int{}
	wait := func(name string, p *qproc) int {
		select {
		case <-p.done:
		case <-time.After(90 * time.Second):
			t.Fatalf("%s did not exit within 90s of the quorum's return: %s", name, p.out.String())
		}
		code := 0
		if ee, ok := p.err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		codes[code]++
		return code
	}
	if code := wait("the holder", a); code != 80 && code != 0 {
		t.Errorf("the holder exited %d: %s", code, a.out.String())
	}
	for i, w := range ws {
		// 80: it was granted after the quorum came back and lost that
		// term in the disruption that follows (the members that were
		// stopped come back with their own elections), before or while
		// its COMMAND ran. Anything else, 70 above all, is a waiter that
		// did not queue again.
		if code := wait(fmt.Sprint("waiter ", i), w); code != 0 && code != 80 {
			t.Errorf("waiter %d exited %d, want 0 (it queues again) or 80: %s", i, code, w.out.String())
		}
	}
	t.Logf("exits by code: %v", codes)
	log, _ := os.ReadFile(filepath.Join(res, "log"))
	started := 0
	for _, s := range strings.Split(string(log), "\n") {
		r, ok := drv.ParseLine(s)
		switch {
		case !ok:
		case r.Kind == "V" || r.Kind == "R":
			t.Errorf("overlap: %s", s)
		case r.Kind == "S":
			started++
		}
	}
	if started < codes[0] {
		t.Errorf("%d COMMANDs started, fewer than the %d wrappers that exited 0", started, codes[0])
	}
}
