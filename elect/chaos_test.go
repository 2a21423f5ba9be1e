package elect

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

var (
	chaosDuration = flag.Duration("chaos.duration", 20*time.Second, "how long TestChaos injects faults; e.g. 10m for a soak (with -timeout 20m: go test stops a test binary after 10m by default)")
	chaosSeed     = flag.Uint64("chaos.seed", 0, "seed for TestChaos's choices; 0 picks one (it is logged)")
	chaosFailover = flag.Bool("chaos.failover", false, "log one line per leader kill, for failover analysis")
)

// TestChaos runs 30+ contenders on one name while, at random moments, one
// joins, leaves, abdicates, is killed (SIGKILL), is asked to stop (SIGTERM),
// is suspended (SIGSTOP, later SIGCONT), or is stolen from (Steal with
// KillAfter, which is how a suspended holder is recovered). Every leader
// appends (epoch, pid, ticket, kind, time) to a shared log guarded as a
// real resource would be: a write whose epoch is lower than one already
// seen is refused (fencing).
//
// Afterwards it checks: no write was refused; the log is one run per epoch
// with strictly increasing epochs and non-overlapping intervals; ordinary
// tickets that were visibly queued were granted in ticket order; every
// contender alive at the end leads once more and exits cleanly (no stuck
// waiter); after Prune only the documented persistent files remain; no
// survivor leaked a goroutine or a descriptor.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process chaos; skipped with -short")
	}
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos: duration %v, seed %d (rerun with -chaos.seed=%d)", *chaosDuration, seed, seed)
	c := &chaos{
		t:     t,
		rng:   rand.New(rand.NewPCG(seed, seed>>1|1)),
		dir:   t.TempDir(),
		res:   t.TempDir(),
		name:  "chaos",
		byPid: map[int][]*chaosProc{},
	}
	l, err := Open(Config{Dir: c.dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Cleanup(c.stopTimers)

	const minLive, maxLive = 30, 40
	for range minLive {
		c.spawn(false)
	}
	end := time.Now().Add(*chaosDuration)
	// The first contenders start all at once, which starves the machine
	// for a while: stalls are counted from a warm-up on.
	c.warm = time.Now().Add(min(3*time.Second, *chaosDuration/4)).UnixNano()
	for time.Now().Before(end) && !t.Failed() {
		d := time.Duration(5+c.rng.IntN(30)) * time.Millisecond
		slept := time.Now()
		time.Sleep(d)
		c.noteLag(slept, d)
		c.act(minLive, maxLive)
		c.checkStarved()
	}
	c.drain()
	if t.Failed() {
		return
	}

	ctx := testCtx(t)
	if err := l.Prune(ctx, c.name); err != nil {
		t.Fatalf("prune: %v", err)
	}
	checkOnlyPersistent(t, l, c.dir, c.name)
	c.checkLog()
	c.report()
}

// checkOnlyPersistent checks that dir holds name's documented persistent
// files and nothing else, and that the queue is empty.
func checkOnlyPersistent(t *testing.T, l *Locker, dir, name string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	want := []string{name + lockSuffix, name + queueSuffix, name + stateSuffix}
	if !slices.Equal(got, want) {
		t.Errorf("lock directory holds %v; want only the persistent %v", got, want)
	}
	left, err := os.ReadDir(filepath.Join(dir, name+queueSuffix))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("queue not empty after every contender left and Prune: %v", names)
	}
	s, err := l.Query(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Held)+len(s.Pending) != 0 {
		t.Errorf("query after the end: %+v", s)
	}
}

// chaos is the orchestrator's state.
type chaos struct {
	t    *testing.T
	rng  *rand.Rand
	dir  string // lock directory
	res  string // the fenced resource
	name string

	mu sync.Mutex
	// procs is every process started, in order; byPid the same by pid,
	// which the kernel reuses (pid_max may be 32768, fewer than a soak's
	// processes): procAt tells which one a pid was at a time.
	procs  []*chaosProc
	byPid  map[int][]*chaosProc
	kills  []killEvent      // SIGKILLs and SIGTERMs of leaders
	queued map[uint64]int64 // ticket -> when its owner saw it in the queue (unix ns)
	since  map[uint64]int64 // ticket -> when it was granted (Leadership.Since, unix ns)
	terms  []term
	fifo   []string // ticket order violations
	n      struct {
		joins, leaves, kills, terms, stops, steals, abdications, stealKills int
		abandoned, rmLocks, combined, doomed                                int
	}
	stopped  map[int]*time.Timer   // suspended pids and their SIGCONT timers
	pauses   [][2]int64            // [SIGSTOP, SIGCONT or exit] in unix ns
	owner    map[uint64]*chaosProc // ticket -> its owner
	wg       sync.WaitGroup
	events   []chaosEvent // what the test did and saw, for a stall's report
	warm     int64        // stalls are counted from then on (unix ns)
	byQueued []uint64     // tickets in the order they were queued (lineAt)
	starved  [][2]int64   // times the test's own sleep overran by over 100ms
}

// noteLag records when the test's own sleep of d from since overran by
// more than 100ms: the machine was starved then (other work, or the
// contenders all at once), and a gap in it says nothing of leaderrun.
func (c *chaos) noteLag(since time.Time, d time.Duration) {
	if over := time.Since(since) - d; over > 100*time.Millisecond {
		c.mu.Lock()
		c.starved = append(c.starved, [2]int64{since.UnixNano(), time.Now().UnixNano()})
		c.mu.Unlock()
	}
}

// starveBound is how long a contender may wait in line, running, without
// leading: the line holds 30 to 40 contenders whose terms last 1 to 40ms,
// so each one's turn comes within a second or two.
const starveBound = 20 * time.Second

// checkStarved fails the test on a contender that has waited in line for
// longer than starveBound without being stopped, and sends it SIGQUIT so
// that its goroutines' stacks show where it waits.
func (c *chaos) checkStarved() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now().UnixNano()
	for _, p := range c.procs {
		if p.exitNs != 0 || p.byUs != 0 || p.leaving || p.leftOK || len(p.queued) == 0 {
			continue
		}
		q := slices.Max(p.queued)
		if now-q < int64(starveBound) || p.doneWith(q, now) || p.stoppedWithin(now-int64(starveBound), now) {
			continue
		}
		var line []string
		if ents, err := os.ReadDir(filepath.Join(c.dir, c.name+queueSuffix)); err == nil {
			for _, e := range ents {
				line = append(line, e.Name())
			}
		}
		c.t.Errorf("contender %d has waited %v in line without leading, not stopped for the last %v (it last said %q); the queue: %v; its stacks follow (SIGQUIT)",
			p.pid, time.Duration(now-q).Round(time.Millisecond), starveBound, p.said, line)
		p.Signal(syscall.SIGQUIT)
		return
	}
}

// stoppedHolder reports whether a contender other than prev said it leads
// between from and to and was stopped then: granted, but stopped before
// its term's first write, it holds the lock (as a stopped holder does) and
// its term is not in the log.
func (c *chaos) stoppedHolder(prev int, from, to int64) bool {
	for _, p := range c.procs {
		if p.pid == prev || !p.stoppedWithin(from, to) {
			continue
		}
		for _, at := range p.led {
			if at >= from && at <= to {
				return true
			}
		}
	}
	return false
}

// starvedWithin reports whether the machine was seen starved between from
// and to.
func (c *chaos) starvedWithin(from, to int64) bool {
	for _, st := range c.starved {
		if st[0] <= to && st[1] >= from {
			return true
		}
	}
	return false
}

type chaosEvent struct {
	ns   int64
	what string
}

// event records what the test did or saw (c.mu held).
func (c *chaos) event(format string, args ...any) {
	c.events = append(c.events, chaosEvent{time.Now().UnixNano(), fmt.Sprintf(format, args...)})
}

// eventsAround lists the events from 500ms before from to to.
func (c *chaos) eventsAround(from, to int64) string {
	var s []string
	for _, e := range c.events {
		if e.ns >= from-int64(500*time.Millisecond) && e.ns <= to {
			s = append(s, fmt.Sprintf("%+.3fs %s", float64(e.ns-from)/1e9, e.what))
		}
	}
	return strings.Join(s, "; ")
}

type killEvent struct {
	at        time.Time
	pid       int
	anyPaused bool // a process was suspended: failover may wait for SIGCONT
}

type chaosProc struct {
	*proctest.Proc
	pid     int
	steal   bool
	exited  chan struct{} // closed once every line is seen and its timer stopped
	leading bool          // last line said "leader"
	leaving bool          // told to leave
	paused  bool          // was suspended at least once
	said    string        // last line
	done    bool          // said "done" (finished cleanly)
	leftOK  bool          // said "left" or "term"
	leaksOK bool
	byUs    syscall.Signal // a fatal signal we sent, 0 if none
	err     string
	startNs int64
	exitNs  int64
	pauses  [][2]int64 // SIGSTOP to SIGCONT (0: not continued), unix ns
	queued  []int64    // when it said each of its tickets was queued
	led     []int64    // when it said it leads
	gaveUp  []int64    // when it said it abandoned a steal
}

// doneWith reports whether p was done with a ticket it queued at q by ns:
// it led, or gave the request up, after q. A contender holds one ticket
// at a time, and says "queued" only for a ticket it saw waiting, so its
// later tickets granted at once leave its last queued one behind.
func (p *chaosProc) doneWith(q, ns int64) bool {
	for _, ts := range [][]int64{p.led, p.gaveUp} {
		for _, t := range ts {
			if t > q && t < ns {
				return true
			}
		}
	}
	return false
}

// runnableSince returns since when p has been runnable (started, not
// exited, not stopped) without a break, as of ns; ok is false when it is
// not runnable then.
func (p *chaosProc) runnableSince(ns int64) (since int64, ok bool) {
	if p.startNs > ns || p.exitNs != 0 && p.exitNs <= ns {
		return 0, false
	}
	// It waits from its last ticket's joining on (before that it did not
	// ask; it was starting, or leading).
	since = -1
	for _, q := range p.queued {
		if q <= ns {
			since = max(since, q)
		}
	}
	if since < 0 {
		return 0, false
	}
	for _, pz := range p.pauses {
		if pz[0] <= ns && (pz[1] == 0 || pz[1] > ns) {
			return 0, false
		}
		if pz[1] != 0 && pz[1] <= ns {
			since = max(since, pz[1])
		}
	}
	return since, true
}

// procAt returns the process that had pid at ns: the last started with
// it by then (a pid is reused only once its process is gone).
func (c *chaos) procAt(pid int, ns int64) *chaosProc {
	ps := c.byPid[pid]
	for i := len(ps) - 1; i >= 0; i-- {
		if ps[i].startNs <= ns {
			return ps[i]
		}
	}
	if len(ps) > 0 {
		return ps[0]
	}
	return nil
}

// describePauses lists p's stops relative to from, for a stall's report.
func (p *chaosProc) describePauses(from int64) string {
	if p == nil {
		return "unknown: not a contender of this test"
	}
	var s []string
	for _, pz := range p.pauses {
		end := "not continued"
		if pz[1] != 0 {
			end = fmt.Sprintf("%+.3fs", float64(pz[1]-from)/1e9)
		}
		s = append(s, fmt.Sprintf("%+.3fs to %s", float64(pz[0]-from)/1e9, end))
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// stoppedWithin reports whether p was stopped at some time in [from, to].
func (p *chaosProc) stoppedWithin(from, to int64) bool {
	for _, pz := range p.pauses {
		if pz[0] <= to && (pz[1] == 0 || pz[1] >= from) {
			return true
		}
	}
	return false
}

func (c *chaos) spawn(steal bool) *chaosProc {
	t := c.t
	env := []string{"T_DIR=" + c.dir, "T_RES=" + c.res, "T_NAME=" + c.name}
	if steal {
		env = append(env, "T_STEAL=1", "T_KILLAFTER=150ms")
		if c.rng.IntN(3) == 0 {
			// A steal that may give up before it is granted (often
			// after deposing the holder): someone must still lead.
			env = append(env, fmt.Sprintf("T_STEALFOR=%dms", 5+c.rng.IntN(100)))
		}
	}
	p := &chaosProc{steal: steal, exited: make(chan struct{})}
	// c.line takes c.mu: it sees p only once p is complete.
	c.mu.Lock()
	defer c.mu.Unlock()
	p.Proc = proctest.Start(t, "contender", proctest.Command("chaos", env...), proctest.Options{
		OnLine: func(line string) { c.line(p, line) },
	})
	p.pid = p.PID()
	p.startNs = time.Now().UnixNano()
	c.procs = append(c.procs, p)
	c.byPid[p.pid] = append(c.byPid[p.pid], p)
	c.event("spawn %d steal %v %v", p.pid, steal, env[3:])
	c.n.joins++
	if steal {
		c.n.steals++
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		<-p.Exited()
		c.mu.Lock()
		p.exitNs = time.Now().UnixNano()
		c.event("exit %d", p.pid)
		if t := c.stopped[p.pid]; t != nil {
			t.Stop()
			delete(c.stopped, p.pid)
		}
		c.mu.Unlock()
		close(p.exited)
	}()
	return p
}

func (c *chaos) line(p *chaosProc, line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p.said = line
	c.event("%d says %s", p.pid, line)
	f := strings.Fields(line)
	if len(f) == 0 {
		return
	}
	switch f[0] {
	case "leader":
		p.leading = true
		p.led = append(p.led, time.Now().UnixNano())
		if len(f) == 4 && f[2] != "0" {
			seq, _ := strconv.ParseUint(f[2], 10, 64)
			ns, _ := strconv.ParseInt(f[3], 10, 64)
			if c.since == nil {
				c.since = map[uint64]int64{}
			}
			c.since[seq] = ns
		}
	case "released":
		p.leading = false
	case "queued":
		seq, _ := strconv.ParseUint(f[1], 10, 64)
		ns, _ := strconv.ParseInt(f[2], 10, 64)
		if c.queued == nil {
			c.queued = map[uint64]int64{}
		}
		c.queued[seq] = ns
		p.queued = append(p.queued, ns)
		if c.owner == nil {
			c.owner = map[uint64]*chaosProc{}
		}
		c.owner[seq] = p
	case "done":
		p.done = true
	case "left", "term":
		p.leftOK = true
	case "leaks":
		p.leaksOK = len(f) > 1 && f[1] == "ok"
		if !p.leaksOK {
			p.err = line
		}
	case "abandoned":
		c.n.abandoned++
		p.gaveUp = append(p.gaveUp, time.Now().UnixNano())
	case "error", "refused":
		p.err = line
	}
}

// live returns the processes that have not exited, are not on their way
// out, in pid order.
func (c *chaos) live() []*chaosProc {
	var ps []*chaosProc
	for _, p := range c.procs {
		select {
		case <-p.exited:
			continue
		default:
		}
		if p.byUs == 0 && !p.leftOK && !p.leaving {
			ps = append(ps, p)
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].pid < ps[j].pid })
	return ps
}

// act injects one random fault or change.
func (c *chaos) act(minLive, maxLive int) {
	c.mu.Lock()
	live := c.live()
	var leader *chaosProc
	for _, p := range live {
		if p.leading {
			leader = p
		}
	}
	anyPaused := len(c.stopped) > 0
	c.mu.Unlock()
	if len(live) < minLive {
		c.spawn(false)
		return
	}
	pick := func() *chaosProc {
		// Half the faults hit the leader, where they matter most.
		if leader != nil && c.rng.IntN(2) == 0 {
			return leader
		}
		return live[c.rng.IntN(len(live))]
	}
	switch r := c.rng.IntN(100); {
	case r < 15 && len(live) < maxLive:
		c.spawn(false)
	case r < 25:
		c.leave(pick())
	case r < 40:
		c.signal(pick(), syscall.SIGKILL, anyPaused)
	case r < 50:
		c.signal(pick(), syscall.SIGTERM, anyPaused)
	case r < 62:
		c.suspend(pick(), time.Duration(20+c.rng.IntN(300))*time.Millisecond)
	case r < 80:
		if leader != nil {
			c.abdicate(leader)
		}
	case r < 84:
		c.removeLockFile()
	case r < 88:
		if len(live) < maxLive {
			c.steal(leader)
		}
	case r < 93:
		if leader != nil {
			c.stopAheadAndKill(live, leader, 1+c.rng.IntN(3))
		}
	case r < 96:
		if len(live) < maxLive {
			c.doomedSteal()
		}
	}
}

// leave tells p to stop taking part.
func (c *chaos) leave(p *chaosProc) {
	c.mu.Lock()
	c.n.leaves++
	p.leaving = true
	c.mu.Unlock()
	p.Send("leave")
}

// abdicate tells the leader to end its term and queue again.
func (c *chaos) abdicate(leader *chaosProc) {
	c.mu.Lock()
	c.n.abdications++
	c.mu.Unlock()
	leader.Send("abdicate")
}

// removeLockFile is a cleaner or a user removing the lock file under
// everyone: no second leader, and someone leads on the file at the path.
func (c *chaos) removeLockFile() {
	c.mu.Lock()
	c.n.rmLocks++
	c.event("rm lock file")
	c.mu.Unlock()
	os.Remove(filepath.Join(c.dir, c.name+lockSuffix))
}

// steal starts a stealer. Half the time it first suspends the leader (if
// any): a suspended leader keeps the lock until resumed or stolen with
// KillAfter, and stealing is how it is recovered.
func (c *chaos) steal(leader *chaosProc) {
	if leader != nil && c.rng.IntN(2) == 0 {
		c.suspend(leader, 2*time.Second)
	}
	c.spawn(true)
}

// suspend sends SIGSTOP to p and SIGCONT after d.
func (c *chaos) suspend(p *chaosProc, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped == nil {
		c.stopped = map[int]*time.Timer{}
	}
	if c.stopped[p.pid] != nil {
		return
	}
	c.n.stops++
	p.paused = true
	p.Signal(syscall.SIGSTOP)
	c.event("SIGSTOP %d for %v", p.pid, d)
	pid := p.pid
	from := time.Now().UnixNano()
	p.pauses = append(p.pauses, [2]int64{from, 0})
	c.stopped[pid] = time.AfterFunc(d, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.stopped[pid] != nil {
			delete(c.stopped, pid)
			p.Signal(syscall.SIGCONT)
			c.event("SIGCONT %d", pid)
		}
		now := time.Now().UnixNano()
		p.pauses[len(p.pauses)-1][1] = now
		c.pauses = append(c.pauses, [2]int64{from, now})
	})
}

// stopAheadAndKill is a combined fault: up to n waiters are stopped (for
// 200ms to 1.5s), then the leader is SIGKILLed or SIGTERMed.
func (c *chaos) stopAheadAndKill(live []*chaosProc, leader *chaosProc, n int) {
	for _, i := range c.rng.Perm(len(live)) {
		if n == 0 {
			break
		}
		if p := live[i]; p != leader {
			c.suspend(p, time.Duration(200+c.rng.IntN(1300))*time.Millisecond)
			n--
		}
	}
	sig := syscall.SIGKILL
	if c.rng.IntN(3) == 0 {
		sig = syscall.SIGTERM
	}
	c.mu.Lock()
	c.n.combined++
	c.mu.Unlock()
	c.signal(leader, sig, true)
}

// doomedSteal is a combined fault: a stealer SIGKILLed at a random point
// of its steal (before it joins, while it waits, after it deposed the
// holder, or once it leads).
func (c *chaos) doomedSteal() {
	p := c.spawn(true)
	c.mu.Lock()
	c.n.doomed++
	c.mu.Unlock()
	time.AfterFunc(time.Duration(c.rng.IntN(300))*time.Millisecond, func() { c.signal(p, syscall.SIGKILL, true) })
}

// The stall bound is the longest a name may stay free, or held by a dead
// term, while a contender could take it: by design 100ms, beyond
// StallBound (a stopped waiter is passed after it) and a term's last write
// (2ms ticks): 125ms, which the soak command passes. The short run of
// go test ./... allows 1s: there every package's tests share the machine,
// and a contender may wait that long for a CPU; it still fails a line
// that waits for a stopped process.
var chaosStallBound = flag.Duration("chaos.stallbound", time.Second, "TestChaos fails when a contender could run while the name was free for longer; the documented soak passes 125ms")

// stallBound is the bound in effect: the flag's, or, under the race
// detector, three times the default (there a contender's report of its
// grant came 0.34s after the grant its ticket records, at a load of 10).
func stallBound() time.Duration {
	if raceBuild && *chaosStallBound == time.Second {
		return 3 * time.Second
	}
	return *chaosStallBound
}

// stalls returns, for every gap between consecutive terms, how long the
// name stayed free (or held by a dead term) while some process other than
// the last holder could have taken it: from the later of the gap's start
// and the moment that process last became runnable to the next term's
// start (its grant, when its holder was stopped in between), for the one
// that waited longest so. Gaps in the first seconds,
// while the first contenders start at once, or while the test's own
// sleep overran (the machine was starved: nothing ran on time), are left
// out; so are gaps whose last holder was stopped (a stopped holder keeps the lock); so are, as the
// documented limit, gaps in which two or more contenders were stopped
// when the holder died without releasing (see stoppedPair), or two of the
// first three in line were stopped (headStopped). c.mu held.
func (c *chaos) stalls() (all []time.Duration, limit, starved int, worst string) {
	var longest time.Duration
	for i := 1; i < len(c.terms); i++ {
		prev, next := c.terms[i-1], c.terms[i]
		from, to := prev.end, next.start
		if from < c.warm {
			continue
		}
		if c.starvedWithin(from, to) {
			starved++
			continue
		}
		if h := c.procAt(prev.pid, from); h != nil && h.stoppedWithin(from, to) {
			continue
		}
		if c.stoppedHolder(prev.pid, from, to) {
			continue
		}
		// The next holder, stopped after its grant and before its term's
		// first write, held the lock from its grant on (as a stopped
		// holder does): the name was free only until then. Its grant is
		// the time it reported, not when the test read the report.
		if g, ok := c.since[next.seq]; ok && g > from && g < to {
			if p := c.procAt(next.pid, g); p != nil && p.stoppedWithin(g, to) {
				to = g
			}
		}
		var gap time.Duration
		var who *chaosProc
		for _, p := range c.procs {
			since, ok := p.runnableSince(to)
			if p.pid == prev.pid || !ok {
				continue
			}
			if d := time.Duration(to - max(from, since)); d > gap {
				gap, who = d, p
			}
		}
		if who == nil {
			continue
		}
		if c.stoppedPair(prev.pid, from, to) || c.headStopped(from, to) {
			limit++
			continue
		}
		all = append(all, gap)
		if gap > longest {
			longest = gap
			worst = fmt.Sprintf("from epoch %d (pid %d, its stops %s) to epoch %d (pid %d), pid %d runnable for all of it; first in line then: %s; around it: %s", prev.epoch, prev.pid, c.procAt(prev.pid, from).describePauses(from), next.epoch, next.pid, who.pid, c.describeLine(from, to), c.eventsAround(from, to))
		}
	}
	return all, limit, starved, worst
}

// headStopped reports whether two or more of the first three waiters in
// line when a term ended (at from) were stopped before the next began (at
// to): the documented limit (see stoppedPair) reached by a release. The
// line at from is rebuilt from what the contenders said: each one's last
// ticket queued before from that was not granted before from.
func (c *chaos) headStopped(from, to int64) bool {
	line := c.lineAt(from)
	n := 0
	for _, seq := range line[:min(3, len(line))] {
		if c.owner[seq].stoppedWithin(from, to) {
			n++
		}
	}
	return n >= 2
}

// describeLine says who stood first in line at from, for a stall's report.
func (c *chaos) describeLine(from, to int64) string {
	var s []string
	line := c.lineAt(from)
	for _, seq := range line[:min(6, len(line))] {
		p := c.owner[seq]
		s = append(s, fmt.Sprintf("%s pid %d (queued %+.3fs, stopped %v, led %d times after, exit %+.3fs, granted %+.3fs)", ticketLabel(seq), p.pid, float64(c.queued[seq]-from)/1e9, p.stoppedWithin(from, to),
			countAfter(p.led, c.queued[seq]), float64(p.exitNs-from)/1e9, float64(c.since[seq]-from)/1e9))
	}
	return strings.Join(s, ", ")
}

// countAfter counts the times in ts after t.
func countAfter(ts []int64, t int64) int {
	n := 0
	for _, x := range ts {
		if x > t {
			n++
		}
	}
	return n
}

// lineAt rebuilds the line at from from what the contenders said: the
// tickets queued in the minute before (nobody waits that long here) whose
// contenders had not led or given up since.
func (c *chaos) lineAt(from int64) []uint64 {
	if len(c.byQueued) != len(c.queued) {
		c.byQueued = c.byQueued[:0]
		for seq := range c.queued {
			c.byQueued = append(c.byQueued, seq)
		}
		slices.SortFunc(c.byQueued, func(a, b uint64) int { return cmp.Compare(c.queued[a], c.queued[b]) })
	}
	end, _ := slices.BinarySearchFunc(c.byQueued, from, func(seq uint64, ns int64) int { return cmp.Compare(c.queued[seq], ns) })
	last := map[*chaosProc]uint64{}
	for i := end - 1; i >= 0 && c.queued[c.byQueued[i]] > from-int64(time.Minute); i-- {
		seq := c.byQueued[i]
		if _, ok := last[c.owner[seq]]; !ok {
			last[c.owner[seq]] = seq // the latest before from
		}
	}
	var line []uint64
	for p, seq := range last {
		if g, ok := c.since[seq]; ok && g < from {
			continue // granted already
		}
		if p.exitNs != 0 && p.exitNs < from || p.doneWith(c.queued[seq], from) {
			continue
		}
		line = append(line, seq)
	}
	// Steal tickets (stealBit) sort first, in number order, then the rest.
	slices.SortFunc(line, func(a, b uint64) int {
		if isSteal(a) != isSteal(b) {
			if isSteal(a) {
				return -1
			}
			return 1
		}
		return cmp.Compare(a, b)
	})
	return line
}

// stoppedPair reports whether the holder of the term that ended at from
// was killed by us before to, while two or more other contenders were
// stopped: the library's documented limit (the two waiters next in line
// stopped after the live ones behind them went to sleep, and a holder
// that dies without releasing: nobody running is told until one of them
// runs again or dies). Which waiters were next in line is not known here,
// so any two stopped count: the figure errs on the side of leaving out.
func (c *chaos) stoppedPair(holder int, from, to int64) bool {
	h := c.procAt(holder, from)
	if h == nil || h.byUs == 0 || h.exitNs == 0 || h.exitNs > to+int64(10*time.Millisecond) {
		return false
	}
	n := 0
	for _, p := range c.procs {
		if p.pid != holder && p.stoppedWithin(min(from, h.exitNs), h.exitNs) {
			n++
		}
	}
	return n >= 2
}

func (c *chaos) signal(p *chaosProc, sig syscall.Signal, anyPaused bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.byUs != 0 {
		return
	}
	if sig == syscall.SIGKILL {
		c.n.kills++
		p.byUs = sig
	} else {
		c.n.terms++
		p.byUs = sig
	}
	if p.leading {
		c.kills = append(c.kills, killEvent{at: time.Now(), pid: p.pid, anyPaused: anyPaused})
	}
	p.Signal(sig)
	c.event("%v %d (leading %v)", sig, p.pid, p.leading)
}

// drain resumes every suspended process, tells every live one to lead once
// more and exit, waits (bounded) for all of them, and checks how each
// ended.
func (c *chaos) drain() {
	c.mu.Lock()
	for pid, tm := range c.stopped {
		tm.Stop()
		c.procAt(pid, time.Now().UnixNano()).Signal(syscall.SIGCONT)
	}
	c.stopped = nil
	all := slices.Clone(c.procs)
	c.mu.Unlock()
	for _, p := range all {
		p.Send("finish")
	}
	c.waitAll(all, 30*time.Second+time.Duration(len(all))*100*time.Millisecond)
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range all {
		c.checkEnd(p)
	}
}

// waitAll waits at most d for every process in all to exit, and fails the
// test naming the stuck ones.
func (c *chaos) waitAll(all []*chaosProc, d time.Duration) {
	deadline := time.After(d)
	for _, p := range all {
		select {
		case <-p.exited:
		case <-deadline:
			c.mu.Lock()
			var stuck []string
			for _, q := range all {
				select {
				case <-q.exited:
				default:
					stuck = append(stuck, fmt.Sprintf("pid %d (last said %q)", q.pid, q.said))
				}
			}
			c.mu.Unlock()
			c.t.Fatalf("stuck: contenders did not finish within the drain deadline: %s", strings.Join(stuck, ", "))
		}
	}
}

// checkEnd checks how the reaped p ended (c.mu held): cleanly after a leak
// check, of our signal, or of a stealer's KillAfter while it was
// suspended.
func (c *chaos) checkEnd(p *chaosProc) {
	t := c.t
	ws, _ := p.Cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case p.err != "":
		t.Errorf("pid %d: %s", p.pid, p.err)
	case p.byUs == syscall.SIGKILL:
		// May have died of our signal or of a stealer's.
	case p.byUs == syscall.SIGTERM && ws.Signaled() && ws.Signal() == syscall.SIGTERM && p.said == "":
		// Terminated while starting, before its handler was set.
	case ws.Signaled() && ws.Signal() == syscall.SIGKILL:
		// Killed by a stealer's KillAfter: only ever an evicted
		// holder that kept the lock for the whole grace period,
		// which a running contender never does. A suspended one
		// may have been granted without having said so yet.
		c.n.stealKills++
		if !p.leading && !p.paused {
			t.Errorf("pid %d was killed by a stealer although it was never suspended and its last word was %q, not a leadership", p.pid, p.said)
		}
	case !p.done && !p.leftOK:
		t.Errorf("pid %d neither finished nor left cleanly: %v, last said %q", p.pid, p.Cmd.ProcessState, p.said)
	case !p.leaksOK:
		t.Errorf("pid %d exited without a leak check: %v, last said %q", p.pid, p.Cmd.ProcessState, p.said)
	case ws.ExitStatus() != 0:
		t.Errorf("pid %d: exit status %d", p.pid, ws.ExitStatus())
	}
}

// stopTimers stops the SIGCONT timers, once every process has been ended
// and reaped by its own cleanup (which runs first), and waits until every
// process's lines have been seen.
func (c *chaos) stopTimers() {
	c.mu.Lock()
	for pid, tm := range c.stopped {
		tm.Stop()
		delete(c.stopped, pid)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// logRec is one line of the fenced log: "KIND EPOCH PID UNIXNANO TICKET"
// (proctest.FencedLog's format, the ticket as its one field).
type logRec struct {
	kind  string // S start, T tick, E end, R refused
	epoch uint64
	pid   int
	seq   uint64
	ns    int64
}

type term struct {
	epoch      uint64
	pid        int
	seq        uint64
	start, end int64
	records    int
}

func readFencedLog(t *testing.T, path string) []logRec {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []logRec
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		l, err := proctest.ParseLogLine(line)
		if errors.Is(err, proctest.ErrTorn) {
			continue // its writer was killed inside the write
		}
		var seq uint64
		if err == nil && len(l.Fields) == 0 {
			err = errors.New("no ticket field")
		}
		if err == nil {
			seq, err = strconv.ParseUint(l.Fields[0], 10, 64)
		}
		if err != nil {
			t.Fatalf("fenced log line %d %q: %v", i+1, line, err)
		}
		recs = append(recs, logRec{kind: l.Kind, epoch: l.Epoch, pid: l.PID, seq: seq, ns: l.Nanos})
	}
	return recs
}

// checkLog checks the fenced log and computes the terms.
func (c *chaos) checkLog() {
	t := c.t
	recs := readFencedLog(t, filepath.Join(c.res, "log"))
	var terms []term
	seen := map[uint64]bool{}
	for i, r := range recs {
		if r.kind == "R" {
			t.Errorf("fenced log line %d: write by pid %d with epoch %d refused: a higher epoch had written already", i+1, r.pid, r.epoch)
			continue
		}
		if n := len(terms); n > 0 && terms[n-1].epoch == r.epoch {
			cur := &terms[n-1]
			if cur.pid != r.pid {
				t.Errorf("fenced log line %d: epoch %d used by pids %d and %d", i+1, r.epoch, cur.pid, r.pid)
			}
			if r.ns < cur.end {
				t.Errorf("fenced log line %d: time goes backwards", i+1)
			}
			cur.end = r.ns
			cur.records++
			continue
		}
		if seen[r.epoch] {
			t.Errorf("fenced log line %d: epoch %d (pid %d) writes again after another leader: overlapping terms", i+1, r.epoch, r.pid)
		}
		if n := len(terms); n > 0 {
			if prev := terms[n-1]; r.epoch <= prev.epoch {
				t.Errorf("fenced log line %d: epoch %d (pid %d) follows epoch %d (pid %d): epochs must strictly increase", i+1, r.epoch, r.pid, prev.epoch, prev.pid)
			} else if r.ns < prev.end {
				t.Errorf("fenced log line %d: term %d starts before term %d ended", i+1, r.epoch, prev.epoch)
			}
		}
		if r.kind != "S" {
			t.Errorf("fenced log line %d: epoch %d begins with %q, not a start", i+1, r.epoch, r.kind)
		}
		seen[r.epoch] = true
		terms = append(terms, term{epoch: r.epoch, pid: r.pid, seq: r.seq, start: r.ns, end: r.ns, records: 1})
	}
	if len(terms) == 0 {
		t.Fatal("nobody ever led")
	}
	c.terms = terms

	c.checkOrder()
}

// checkOrder checks that tickets were granted in queue order: steal
// tickets first, then by number. Grant marks its ticket and takes the time
// (Leadership.Since) before its last look at the queue, and steps back if
// any ticket is ahead of it; a ticket that its owner saw linked in the
// queue before that time was therefore there at that look. So if ticket M
// is ahead of ticket N, M's owner saw M queued before N's Since, and M was
// granted after N, the order was broken. (A ticket that was still being
// published when N looked is not ahead of it: joining is the link.)
func (c *chaos) checkOrder() {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := func(seq uint64) uint64 { return seq ^ stealBit } // steals sort first
	for n, sn := range c.since {
		for m, sm := range c.since {
			if key(m) >= key(n) || sm <= sn {
				continue
			}
			if c.passedWhileStopped(m, sn) {
				continue
			}
			if q, ok := c.queued[m]; ok && q < sn {
				c.fifo = append(c.fifo, fmt.Sprintf("ticket %s was granted %v before ticket %s, which was queued ahead of it %v before that grant",
					ticketLabel(n), time.Duration(sm-sn), ticketLabel(m), time.Duration(sn-q)))
			}
		}
	}
	for _, v := range c.fifo {
		c.t.Errorf("ticket order: %s", v)
	}
}

// passedWhileStopped reports whether ticket m's owner was sent SIGSTOP
// before time at while m waited (it may have been passed while stopped).
func (c *chaos) passedWhileStopped(m uint64, at int64) bool {
	q, ok := c.queued[m]
	if !ok {
		return false
	}
	for _, pz := range c.owner[m].pauses {
		if from := pz[0]; from < at && from > q-int64(time.Second) {
			return true
		}
	}
	return false
}

func ticketLabel(seq uint64) string { return ticketName(seq&^stealBit, isSteal(seq)) }

// Steal tickets are reported with this bit set, to keep one number space.
const stealBit = 1 << 63

func isSteal(seq uint64) bool { return seq&stealBit != 0 }

// report logs the figures of the run.
func (c *chaos) report() {
	t := c.t
	c.mu.Lock()
	defer c.mu.Unlock()
	var fails []time.Duration
	var npaused int
	for _, k := range c.kills {
		var next int64
		for _, tm := range c.terms {
			if tm.start > k.at.UnixNano() && tm.pid != k.pid {
				next = tm.start
				break
			}
		}
		if next == 0 {
			continue
		}
		paused := k.anyPaused
		for _, pz := range c.pauses {
			if pz[0] < next && pz[1] > k.at.UnixNano() {
				paused = true
			}
		}
		if paused {
			npaused++
			continue
		}
		fails = append(fails, time.Duration(next-k.at.UnixNano()))
		if *chaosFailover {
			var last term
			for _, tm := range c.terms {
				if tm.pid == k.pid && tm.start < k.at.UnixNano() {
					last = tm
				}
			}
			t.Logf("kill pid %d at %d: its last term %d..%d (%v before kill); next start after %v", k.pid, k.at.UnixNano(), last.start, last.end, time.Duration(k.at.UnixNano()-last.end), time.Duration(next-k.at.UnixNano()))
		}
	}
	slices.Sort(fails)
	var maxGap time.Duration
	for i := 1; i < len(c.terms); i++ {
		maxGap = max(maxGap, time.Duration(c.terms[i].start-c.terms[i-1].end))
	}
	records := 0
	for _, tm := range c.terms {
		records += tm.records
	}
	fig := fmt.Sprintf("chaos figures: %d processes, %d leaderships (%d fenced writes, 0 refused), %d joins, %d leaves, %d SIGKILL, %d SIGTERM, %d SIGSTOP/SIGCONT, %d steals (%d holders killed after KillAfter, %d abandoned), %d abdications, %d lock files removed",
		len(c.procs), len(c.terms), records, c.n.joins, c.n.leaves, c.n.kills, c.n.terms, c.n.stops, c.n.steals, c.n.stealKills, c.n.abandoned, c.n.abdications, c.n.rmLocks)
	if len(fails) > 0 {
		fig += fmt.Sprintf("; failover after a leader's SIGKILL/SIGTERM (%d, none suspended meanwhile): median %v, p99 %v, max %v",
			len(fails), fails[len(fails)/2].Round(time.Microsecond), fails[len(fails)*99/100].Round(time.Microsecond), fails[len(fails)-1].Round(time.Microsecond))
	}
	fig += fmt.Sprintf("; %d more with a process suspended meanwhile; longest gap between terms %v", npaused, maxGap.Round(time.Microsecond))
	fig += fmt.Sprintf("; combined faults: %d leader kills with 1-3 contenders stopped, %d stealers SIGKILLed mid-steal", c.n.combined, c.n.doomed)
	if st, limit, starved, worst := c.stalls(); len(st) > 0 {
		slices.Sort(st)
		fig += fmt.Sprintf("; stalls (name free or dead-held while a contender could run, %d gaps): p50 %v, p99 %v, max %v (bound %v); %d gaps left out as the documented limit (two of the first three in line stopped, or a holder killed while two were); %d gaps while the test itself was starved (its sleep overran by over 100ms) left out",
			len(st), st[len(st)/2].Round(time.Microsecond), st[len(st)*99/100].Round(time.Microsecond), st[len(st)-1].Round(time.Microsecond), stallBound(), limit, starved)
		if st[len(st)-1] > stallBound() {
			t.Errorf("a runnable contender waited %v with the name free or held by a dead term (the bound is %v): %s", st[len(st)-1], stallBound(), worst)
		}
	}
	t.Log(fig)
	if testing.Verbose() {
		fmt.Println(fig)
	}
}
