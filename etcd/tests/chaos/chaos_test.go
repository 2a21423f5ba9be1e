package chaos

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/etcd/internal/etcdtest"
	drv "github.com/leaderrun/leaderrun/internal/chaos"
	"github.com/leaderrun/leaderrun/internal/proctest"
	"github.com/leaderrun/leaderrun/oslock"
)

var (
	chaosDuration = flag.Duration("etcdchaos.duration", defaultDuration(), "how long TestEtcdChaos injects faults (default 20s, or $LEADERRUN_ETCD_CHAOS_DURATION); 2m or more for a soak")
	chaosSeed     = flag.Uint64("etcdchaos.seed", 0, "seed for TestEtcdChaos's choices; 0 picks one (it is logged)")
	chaosKeep     = flag.Bool("etcdchaos.keep", false, "keep TestEtcdChaos's log and wrapper outputs (the directory is logged)")
	chaosQuorum   = flag.Bool("etcdchaos.quorum", true, "let TestEtcdChaos stop 2 of the 3 etcd members at once, briefly, now and then")
	chaosStall    = flag.Duration("etcdchaos.stallbound", 4*time.Second, "TestEtcdChaos fails when a runnable wrapper waited longer with the name free or held by an ended term, counted from its beginning and from the last stop, kill or cut-off of a wrapper (the documented bound: the TTL, for which a stopped, dead or cut-off waiter or holder ahead keeps its lease, and a second)")
	chaosFault    = flag.Duration("etcdchaos.faultbound", 6*time.Second, "TestEtcdChaos fails when such a wait went on for longer after the last etcd fault near it was undone (the documented bound: TTL + 3s, as a new raft leader extends every lease by the TTL and its election timeout)")
	chaosNet      = flag.Bool("etcdchaos.partitions", true, "run TestEtcdChaos's hosts and members in network namespaces it makes, and cut one host off now and then, healing it after the TTL (skipped, with a log line, where namespaces cannot be made)")
)

func defaultDuration() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("LEADERRUN_ETCD_CHAOS_DURATION")); err == nil && d > 0 {
		return d
	}
	return 20 * time.Second
}

// The wrappers' settings: a short lease, so that a stopped wrapper's term
// passes within seconds (its deadline is the TTL less a 1.5s margin after
// the last renewal; COMMAND gets SIGTERM then, SIGKILL --grace later).
const (
	ttl   = "3s"
	grace = "500ms"
)

var hosts = []string{"A", "B", "C"}

// TestEtcdChaos runs leaderrun-etcd wrappers on three simulated hosts (a
// lock directory and a --host name each), a few on each, for one name
// over a 3-member etcd. Each host (its wrappers, watchdogs and COMMANDs)
// runs in a network namespace of its own and the members in another,
// joined by a bridge (etcdtest.Net), so that a host can be cut off; where
// namespaces cannot be made, everything runs on loopback and there are
// no partitions. Their COMMAND (the test binary in the
// COMMAND role of internal/chaos) takes a "running" flock, then appends a tick
// "KIND EPOCH PID UNIXNANO WRAPPER HOST" to a shared fenced log every 3 ms
// while it runs. At random moments wrappers get SIGKILL (their watchdog
// must kill COMMAND and revoke the lease) or SIGSTOP and, later, SIGCONT
// (their watchdog must kill COMMAND by the term's deadline, before the
// lease can pass to another host), and one etcd member at a time is
// SIGKILLed and restarted, or SIGSTOPped and continued (the raft leader,
// now and then, past the TTL); now and then two members are stopped for a
// second, taking the quorum away, or one host, mostly the leader's, is
// cut off and healed after the TTL.
//
// The detector of two COMMANDs at once has three parts:
//
//   - the running flock: each COMMAND takes flock(2) LOCK_NB on one file
//     at its start and holds it until it is gone (the kernel drops it only
//     when the process has exited), so a COMMAND that finds it taken
//     writes a V line: another COMMAND, of any host and any term, was
//     still alive when it started. This covers the whole life of a
//     COMMAND, ticking or not, with no time bound to choose;
//   - the fence of the log (proctest.FencedLog): a tick whose epoch is
//     below the highest written so far is refused and logged as R: a
//     deposed COMMAND ran on after its successor's first write;
//   - the log itself, read afterwards: lines are written under the
//     guard's flock with the time taken inside it, so log order is time
//     order; sorted by time, the epochs never go back to a lower one
//     once a higher one has ticked, each new epoch begins with its
//     COMMAND's start (S), epochs increase strictly from term to term,
//     and each belongs to one wrapper.
//
// It also checks that every wrapper's exit status is explained by its
// fate (0; SIGKILL if killed; 80 if stopped past its deadline or when an
// etcd fault came during its life; 69 only during an etcd fault), that a
// last wrapper leads once every fault is undone, and that no COMMAND and
// no process of any term (one whose environment carries this run's
// marker) is left running at the end. The figures (failover after a
// leader's SIGKILL, how long a stopped leader's COMMAND ran on) are
// logged with -v.
func TestEtcdChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process chaos over etcd; skipped with -short")
	}
	c := runChaos(t, chaosOptions{duration: *chaosDuration, faults: true, violation: t.Errorf})
	if c != nil && !t.Failed() {
		c.report()
	}
}

// TestEtcdChaosDetects checks the detector itself: the same run without
// faults, but with each host on an etcd prefix of its own (three
// elections instead of one, as a misconfigured fleet would have), must
// find COMMANDs that ran at once.
func TestEtcdChaosDetects(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process chaos over etcd; skipped with -short")
	}
	var found []string
	runChaos(t, chaosOptions{duration: 3 * time.Second, split: true, violation: func(format string, args ...any) {
		found = append(found, fmt.Sprintf(format, args...))
	}})
	if len(found) == 0 {
		t.Fatal("three elections at once over one resource, and the detector found no overlap")
	}
	i := max(0, slices.IndexFunc(found, func(s string) bool { return strings.HasPrefix(s, "log line") }))
	t.Logf("the detector found %d violations in a split run, such as: %.400s", len(found), found[i])
}

type chaosOptions struct {
	duration  time.Duration
	faults    bool // inject faults; else only start wrappers
	split     bool // each host on a prefix of its own
	violation func(format string, args ...any)
}

// runChaos runs the orchestrator for o.duration, drains and checks the
// log; it reports what the log shows to o.violation, and everything else
// to t.
func runChaos(t *testing.T, o chaosOptions) *chaos {
	etcdtest.Require(t)
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("etcdchaos: duration %v, seed %d (rerun with -etcdchaos.seed=%d)", o.duration, seed, seed)
	tmp := t.TempDir()
	if *chaosKeep {
		var err error
		if tmp, err = os.MkdirTemp("", "etcdchaos-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("etcdchaos: keeping %s", tmp)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var nw *etcdtest.Net
	if o.faults && *chaosNet {
		if nw, err = etcdtest.NewNet(hosts); err != nil {
			t.Logf("etcdchaos: no partitions in this run (%v): hosts and members share the loopback", err)
			nw = nil
		}
	}
	cl, err := etcdtest.Start(etcdtest.Options{Members: 3, Net: nw})
	if err != nil {
		if nw != nil {
			nw.Close()
		}
		t.Fatal(err)
	}
	c := &chaos{
		net:       nw,
		t:         t,
		o:         o,
		rng:       rand.New(rand.NewPCG(seed, seed>>1|1)),
		cl:        cl,
		self:      self,
		res:       filepath.Join(tmp, "res"),
		log:       drv.NewTail(filepath.Join(tmp, "res")),
		out:       filepath.Join(tmp, "out"),
		dirs:      map[string]string{},
		prefix:    fmt.Sprintf("/etcdchaos-%d/", seed),
		stopped:   map[int]bool{},
		violation: o.violation,
	}
	for _, d := range []string{c.res, c.out} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range hosts {
		c.dirs[h] = filepath.Join(tmp, "host"+h)
		if err := os.Mkdir(c.dirs[h], 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(c.cleanup)

	const minPerHost, maxPerHost = 2, 4
	for _, h := range hosts {
		for range minPerHost {
			c.spawn(h)
		}
	}
	end := time.Now().Add(o.duration)
	for time.Now().Before(end) && !t.Failed() {
		time.Sleep(time.Duration(20+c.rng.IntN(60)) * time.Millisecond)
		c.runDue(false)
		c.tail()
		c.act(minPerHost, maxPerHost)
	}
	c.drain()
	if *chaosKeep {
		c.writeEvents(filepath.Join(tmp, "events"))
	}
	c.checkLog()
	return c
}

type fate int

const (
	fateNone fate = iota
	fateKill
	fateStop
)

func (f fate) String() string { return [...]string{"none", "SIGKILL", "SIGSTOP+SIGCONT"}[f] }

type wrapper struct {
	i        int
	host     string
	cmd      *exec.Cmd
	pid      int
	fate     fate
	stubborn bool
	startNs  int64
	exited   chan struct{}
	status   syscall.WaitStatus
	waitErr  error
	exitNs   int64
}

func (w *wrapper) done() bool { return drv.Closed(w.exited) }

// fault is an etcd fault's window, or a partition's.
type fault struct {
	what       string
	start, end int64  // end 0 while it lasts
	host       string // the host cut off, for a partition
}

// action is something the orchestrator does later: continue a stopped
// wrapper or member, restart a killed member.
type action struct {
	at   time.Time
	what string
	do   func()
}

type signalled struct {
	at     int64
	pid    int
	sig    syscall.Signal
	leader bool
	epoch  uint64 // the leader's, if leader
}

// chaos is the orchestrator's state. Only the test goroutine changes it,
// except a wrapper's status, which its reaper sets before closing exited.
type chaos struct {
	t         *testing.T
	o         chaosOptions
	violation func(format string, args ...any) // what the log shows
	rng       *rand.Rand
	cl        *etcdtest.Cluster
	self      string
	res, out  string
	dirs      map[string]string
	prefix    string
	procs     []*wrapper
	wg        sync.WaitGroup
	pending   []action
	faults    []*fault
	net       *etcdtest.Net // nil: no partitions
	parts     []*fault      // partitions, with the host cut off
	cut       string        // the host cut off now, or ""
	lastCut   time.Time
	stopped   map[int]bool // members stopped or killed now, by index
	signals   []signalled
	n         struct{ kills, stops, leaderKills, leaderStops, memberKills, memberStops, longStops, quorumLosses, memberCuts int }
	log       *drv.Tail
	leader    int // the wrapper whose COMMAND was seen starting last
	leaderEp  uint64
	leading   bool // and that COMMAND has not been seen ending
	events    drv.Events
	terms     []drv.Term
	lastFault time.Time
}

func (c *chaos) event(format string, args ...any) { c.events.Add(format, args...) }

// eventsBefore returns the events in the three seconds before ns.
func (c *chaos) eventsBefore(ns int64) string { return c.eventsBetween(ns-int64(3*time.Second), ns) }

// eventsBetween returns the events in (from, to], with times relative to
// to.
func (c *chaos) eventsBetween(from, ns int64) string {
	var exits []drv.Event
	for _, w := range c.procs {
		if w.done() {
			exits = append(exits, drv.Event{Nanos: w.exitNs, What: fmt.Sprintf("wrapper %d (%s) exited: %v", w.pid, w.host, w.status)})
		}
	}
	return c.events.Between(from, ns, exits...)
}

// writeEvents writes every event, one a line, for -etcdchaos.keep.
func (c *chaos) writeEvents(path string) {
	var b strings.Builder
	for _, e := range c.events.List() {
		fmt.Fprintf(&b, "%d %s\n", e.Nanos, e.What)
	}
	for _, w := range c.procs {
		if w.done() {
			fmt.Fprintf(&b, "%d wrapper %d (#%d on %s, %v) exited: %v\n", w.exitNs, w.pid, w.i, w.host, w.fate, w.status)
		}
	}
	os.WriteFile(path, []byte(b.String()), 0o600)
}

func (c *chaos) later(d time.Duration, what string, do func()) {
	c.pending = append(c.pending, action{time.Now().Add(d), what, do})
}

// runDue runs the actions that are due, or all of them.
func (c *chaos) runDue(all bool) {
	now := time.Now()
	var keep []action
	for _, a := range c.pending {
		if all || !a.at.After(now) {
			c.event("%s", a.what)
			a.do()
		} else {
			keep = append(keep, a)
		}
	}
	c.pending = keep
}

// spawn starts one wrapper on host.
func (c *chaos) spawn(host string) *wrapper {
	t := c.t
	w := &wrapper{i: len(c.procs), host: host, exited: make(chan struct{})}
	prefix := c.prefix
	if c.o.split {
		prefix += host + "/"
	}
	args := []string{"--dir", c.dirs[host], "--host", host, "--name", "chaos", "--ttl", ttl, "--grace", grace,
		"--dial-timeout", "2s", "--etcd-endpoints", strings.Join(c.cl.Endpoints(), ","), "--etcd-prefix", prefix,
		"--", c.self, "-test.run=^$"}
	// Most COMMANDs are short; one in five outlasts a stopped wrapper's
	// deadline, so that its watchdog has to stop it.
	spec := drv.Spec{Res: c.res, Host: host, Tick: 3 * time.Millisecond, Hold: time.Duration(50+c.rng.IntN(300)) * time.Millisecond}
	if c.rng.IntN(5) == 0 {
		spec.Hold = time.Duration(1000+c.rng.IntN(2000)) * time.Millisecond
	}
	if c.rng.IntN(3) == 0 {
		w.stubborn = true
		spec.Stubborn = true
	}
	env := spec.Env()
	w.cmd = c.command(host, drv.Bin, args...)
	w.cmd.Env = env
	f, err := os.Create(filepath.Join(c.out, fmt.Sprintf("%05d-%s", w.i, host)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A file, not a pipe: Wait must not wait for a leftover holding it.
	w.cmd.Stdout, w.cmd.Stderr = f, f
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.pid, w.startNs = w.cmd.Process.Pid, time.Now().UnixNano()
	c.procs = append(c.procs, w)
	c.event("start wrapper %d (#%d) on %s stubborn=%v", w.pid, w.i, host, w.stubborn)
	drv.Reap(&c.wg, w.cmd, func(status syscall.WaitStatus, err error, ns int64) {
		w.status, w.waitErr, w.exitNs = status, err, ns
		close(w.exited)
	})
	return w
}

// command is exec.Command for a process of host: in its network
// namespace when there is a network.
func (c *chaos) command(host, name string, args ...string) *exec.Cmd {
	if c.net != nil {
		return c.net.Command(host, name, args...)
	}
	return exec.Command(name, args...)
}

// live returns the wrappers of host ("" for all) that run and have met no
// fate yet.
func (c *chaos) live(host string) []*wrapper {
	var ws []*wrapper
	for _, w := range c.procs {
		if !w.done() && w.fate == fateNone && (host == "" || w.host == host) {
			ws = append(ws, w)
		}
	}
	return ws
}

// act injects one random fault or change.
func (c *chaos) act(minPerHost, maxPerHost int) {
	for _, h := range hosts {
		if len(c.live(h)) < minPerHost {
			c.spawn(h)
			return
		}
	}
	live := c.live("")
	var leader *wrapper
	for _, w := range live {
		if w.pid == c.leader && c.leading {
			leader = w
		}
	}
	pick := func() *wrapper {
		// Most faults hit the leader while its COMMAND runs, where they
		// matter most. A fault of a waiter at the head of the queue
		// holds the queue up until its session's lease expires (a TTL).
		if leader != nil && c.rng.IntN(4) != 0 {
			return leader
		}
		return live[c.rng.IntN(len(live))]
	}
	r := c.rng.IntN(100)
	if !c.o.faults {
		r %= 10
	}
	if leader == nil && r >= 10 && r < 19 && c.rng.IntN(4) != 0 {
		// No COMMAND runs: the queue's head is a waiter, and a killed or
		// stopped waiter holds the queue up for a TTL. Spare most.
		return
	}
	switch {
	case r < 10:
		h := hosts[c.rng.IntN(len(hosts))]
		if len(c.live(h)) < maxPerHost {
			c.spawn(h)
		}
	case r < 15:
		c.signal(pick(), syscall.SIGKILL)
	case r < 19:
		w := pick()
		c.signal(w, syscall.SIGSTOP)
		// Most stops outlast the term's deadline (1.5s after a renewal).
		d := time.Duration(300+c.rng.IntN(3700)) * time.Millisecond
		c.later(d, fmt.Sprintf("SIGCONT to wrapper %d", w.pid), func() {
			if w.pid > 1 && !w.done() {
				w.cmd.Process.Signal(syscall.SIGCONT)
			}
		})
	case r < 21 && len(c.stopped) == 0 && time.Since(c.lastFault) > 4*time.Second:
		c.etcdFault()
	case r < 23 && c.net != nil && c.cut == "" && time.Since(c.lastCut) > 10*time.Second:
		// Mostly the leader's host, while its COMMAND runs.
		h := hosts[c.rng.IntN(len(hosts))]
		switch {
		case leader != nil && c.rng.IntN(4) != 0:
			h = leader.host
		case leader == nil && c.rng.IntN(4) != 0:
			return
		}
		c.partition(h)
	}
}

// partition cuts host off from the cluster and the other hosts, and heals
// it 0.5–3s after the TTL: its leader's term must end by its deadline,
// its watchdog must stop COMMAND, and the name must pass to another host
// once the lease has expired, with no overlap; its waiters cannot be
// granted while it is cut, and must queue again once it is healed.
func (c *chaos) partition(host string) {
	f := &fault{start: time.Now().UnixNano(), host: host, what: "partition of host " + host}
	if err := c.net.Cut(host); err != nil {
		c.t.Errorf("cut host %s: %v", host, err)
		return
	}
	c.cut, c.lastCut = host, time.Now()
	c.parts = append(c.parts, f)
	c.event("%s", f.what)
	ttlD, _ := time.ParseDuration(ttl)
	c.later(ttlD+time.Duration(500+c.rng.IntN(2500))*time.Millisecond, "heal host "+host, func() {
		if err := c.net.Heal(host); err != nil {
			c.t.Errorf("heal host %s: %v", host, err)
		}
		c.cut, c.lastCut = "", time.Now()
		f.end = time.Now().UnixNano()
	})
}

// cutDuring reports whether host ("" for any) was cut off during [from, to], taking
// each partition to last a lease (and a reconnection) longer than it did.
func (c *chaos) cutDuring(host string, from, to int64) bool {
	for _, f := range c.parts {
		end := f.end
		if end == 0 {
			end = time.Now().UnixNano()
		}
		if (host == "" || f.host == host) && f.start <= to && end+int64(4*time.Second) >= from {
			return true
		}
	}
	return false
}

// signal sends sig to the wrapper's pid only, never to its group: its
// COMMAND must be ended by its watchdog.
func (c *chaos) signal(w *wrapper, sig syscall.Signal) {
	if w.fate != fateNone || w.done() || w.pid < 2 {
		return
	}
	isLeader := w.pid == c.leader
	s := signalled{at: time.Now().UnixNano(), pid: w.pid, sig: sig, leader: isLeader}
	if isLeader {
		s.epoch = c.leaderEp
	}
	c.signals = append(c.signals, s)
	switch sig {
	case syscall.SIGKILL:
		w.fate = fateKill
		c.n.kills++
		if isLeader {
			c.n.leaderKills++
		}
	case syscall.SIGSTOP:
		w.fate = fateStop
		c.n.stops++
		if isLeader {
			c.n.leaderStops++
		}
	}
	c.event("%v to wrapper %d on %s (leader %v)", sig, w.pid, w.host, isLeader)
	if err := w.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		c.t.Errorf("signal %v to wrapper %d: %v", sig, w.pid, err)
	}
}

// etcdFault kills or stops one member (or, now and then, stops two) and
// undoes it a little later.
func (c *chaos) etcdFault() {
	c.lastFault = time.Now()
	f := &fault{start: time.Now().UnixNano()}
	undo := func(i int, restart bool) func() {
		return func() {
			m := c.cl.Members[i]
			if restart {
				if err := m.Start(); err != nil {
					c.t.Errorf("restart etcd member %s: %v", m.Name, err)
				}
			} else {
				m.Signal(syscall.SIGCONT)
			}
			delete(c.stopped, i)
			if len(c.stopped) == 0 {
				f.end = time.Now().UnixNano()
			}
		}
	}
	i := c.rng.IntN(len(c.cl.Members))
	switch r := c.rng.IntN(9); {
	case r == 0 && *chaosQuorum:
		j := (i + 1 + c.rng.IntN(len(c.cl.Members)-1)) % len(c.cl.Members)
		f.what = fmt.Sprintf("SIGSTOP etcd members %s and %s (no quorum)", c.cl.Members[i].Name, c.cl.Members[j].Name)
		c.cl.Members[i].Signal(syscall.SIGSTOP)
		c.cl.Members[j].Signal(syscall.SIGSTOP)
		c.stopped[i], c.stopped[j] = true, true
		d := time.Duration(500+c.rng.IntN(1000)) * time.Millisecond
		c.later(d, "SIGCONT etcd member "+c.cl.Members[i].Name, undo(i, false))
		c.later(d, "SIGCONT etcd member "+c.cl.Members[j].Name, undo(j, false))
		c.n.quorumLosses++
	case r == 1:
		// The raft leader, stopped past the TTL (the soak of issue 21:
		// waiters whose watch sat on it heard of their grants late, and
		// etcd 3.4, resuming, revoked leases it believed expired).
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if m, err := c.cl.Leader(ctx); err == nil {
			i = slices.Index(c.cl.Members, m)
		}
		cancel()
		f.what = "SIGSTOP etcd member " + c.cl.Members[i].Name + " (the raft leader), past the TTL"
		c.cl.Members[i].Signal(syscall.SIGSTOP)
		c.stopped[i] = true
		c.later(time.Duration(4000+c.rng.IntN(3000))*time.Millisecond, "SIGCONT etcd member "+c.cl.Members[i].Name, undo(i, false))
		c.n.longStops++
	case r == 8 && c.net != nil:
		// A member cut off (the raft leader or not): it runs on, and
		// whoever talks to it hears nothing; heard of again 1-5s later.
		name := etcdtest.MemberName(i)
		f.what = "partition of etcd member " + c.cl.Members[i].Name
		if err := c.net.Cut(name); err != nil {
			c.t.Errorf("cut etcd member %s: %v", c.cl.Members[i].Name, err)
			return
		}
		c.stopped[i] = true
		c.later(time.Duration(1000+c.rng.IntN(4000))*time.Millisecond, "heal etcd member "+c.cl.Members[i].Name, func() {
			if err := c.net.Heal(name); err != nil {
				c.t.Errorf("heal etcd member %s: %v", c.cl.Members[i].Name, err)
			}
			delete(c.stopped, i)
			if len(c.stopped) == 0 {
				f.end = time.Now().UnixNano()
			}
		})
		c.n.memberCuts++
	case r < 4:
		f.what = "SIGKILL etcd member " + c.cl.Members[i].Name
		c.cl.Members[i].Kill()
		c.stopped[i] = true
		c.later(time.Duration(500+c.rng.IntN(2500))*time.Millisecond, "restart etcd member "+c.cl.Members[i].Name, undo(i, true))
		c.n.memberKills++
	default:
		f.what = "SIGSTOP etcd member " + c.cl.Members[i].Name
		c.cl.Members[i].Signal(syscall.SIGSTOP)
		c.stopped[i] = true
		c.later(time.Duration(300+c.rng.IntN(2700))*time.Millisecond, "SIGCONT etcd member "+c.cl.Members[i].Name, undo(i, false))
		c.n.memberStops++
	}
	c.faults = append(c.faults, f)
	c.event("%s", f.what)
}

// faultDuring reports whether an etcd fault overlapped [from, to], taking
// each fault to last a lease (and a reconnection) longer than it did.
func (c *chaos) faultDuring(from, to int64) bool {
	for _, f := range c.faults {
		end := f.end
		if end == 0 {
			end = time.Now().UnixNano()
		}
		if f.start <= to && end+int64(4*time.Second) >= from {
			return true
		}
	}
	return false
}

// tail reads the log appended since the last call, to know which wrapper
// leads: the one whose COMMAND was seen starting last.
func (c *chaos) tail() {
	c.log.Read(func(r drv.Line) {
		switch {
		case r.Epoch < c.leaderEp:
		case r.Kind == "S":
			c.leader, c.leaderEp, c.leading = r.Wrapper, r.Epoch, true
		case r.Kind == "E" && r.Epoch == c.leaderEp:
			c.leading = false
		}
	})
}

// drain undoes every fault, lets every wrapper left lead once and exit,
// runs a last wrapper, which must lead, and checks every exit status and
// that nothing of any term is left.
func (c *chaos) drain() {
	t := c.t
	c.runDue(true)
	for i, m := range c.cl.Members {
		if !m.Running() {
			if err := m.Start(); err != nil {
				t.Errorf("restart etcd member %s: %v", m.Name, err)
			}
		}
		delete(c.stopped, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.cl.WaitHealthy(ctx); err != nil {
		t.Errorf("etcd does not recover after the faults: %v", err)
		return
	}
	wait := func(ws []*wrapper, d time.Duration) bool {
		deadline := time.After(d)
		for _, w := range ws {
			select {
			case <-w.exited:
			case <-deadline:
				var stuck []string
				for _, w := range ws {
					if !w.done() {
						stuck = append(stuck, fmt.Sprintf("wrapper %d (#%d on %s, %v)", w.pid, w.i, w.host, w.fate))
					}
				}
				out, _ := c.command("A", drv.Bin, "--dir", c.dirs["A"], "--etcd-endpoints", strings.Join(c.cl.Endpoints(), ","), "--etcd-prefix", c.prefix, "status", "--json").CombinedOutput()
				t.Errorf("stuck: %d wrappers did not exit within %v: %s; status: %s", len(stuck), d, strings.Join(stuck, ", "), out)
				return false
			}
		}
		return true
	}
	if !wait(c.procs, 60*time.Second) {
		return
	}
	last := c.spawn("A")
	if !wait([]*wrapper{last}, 30*time.Second) {
		return
	}
	c.wg.Wait()
	c.tail()
	if c.leader != last.pid {
		t.Errorf("the last wrapper (%d) did not lead; the last COMMAND seen was wrapper %d's", last.pid, c.leader)
	}
	for _, w := range c.procs {
		if why := c.unexpectedExit(w); why == "COMMAND saw a violation (see the log check)" {
			c.violation("wrapper %d (#%d on %s): %s", w.pid, w.i, w.host, why)
		} else if why != "" {
			out, _ := os.ReadFile(filepath.Join(c.out, fmt.Sprintf("%05d-%s", w.i, w.host)))
			t.Errorf("wrapper %d (#%d on %s, %v, stubborn %v): %s; output: %q", w.pid, w.i, w.host, w.fate, w.stubborn, why, out)
		}
	}
	// Every wrapper has exited: their watchdogs have had their say too.
	// Whatever of a term still runs now is a leak.
	var left []proctest.Leftover
	deadline := time.Now().Add(3 * time.Second)
	for {
		left = proctest.WithEnv(drv.Marker(c.res))
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("processes of the run still alive after every wrapper exited: %s", proctest.Describe(left, nil))
	}
}

// unexpectedExit says what is wrong with the way w ended, or "".
func (c *chaos) unexpectedExit(w *wrapper) string {
	ws := w.status
	if w.waitErr != nil && w.cmd.ProcessState == nil {
		return fmt.Sprintf("wait: %v", w.waitErr)
	}
	if ws.Signaled() {
		if ws.Signal() == syscall.SIGKILL && w.fate == fateKill {
			return ""
		}
		return fmt.Sprintf("killed by %v, which the test did not send", ws.Signal())
	}
	etcdFault := c.faultDuring(w.startNs, w.exitNs) || c.cutDuring(w.host, w.startNs, w.exitNs)
	switch code := ws.ExitStatus(); {
	case code == 0:
		return ""
	case code == 80 && (w.fate == fateStop || etcdFault):
		return "" // its term passed its deadline, or its lease was lost
	case code == 69 && etcdFault:
		return "" // etcd could not be reached, or had no quorum
	case code == drv.ExitViolation:
		return "COMMAND saw a violation (see the log check)"
	default:
		return fmt.Sprintf("exit status %d (etcd fault during its life: %v)", code, etcdFault)
	}
}

// cleanup ends whatever a run, failed or not, left: wrappers (continued,
// then killed), processes that carry the run's marker, the cluster; then
// it reaps the orphans that were handed to this process (package cmd
// makes it a child subreaper).
func (c *chaos) cleanup() {
	for _, w := range c.procs {
		if !w.done() && w.pid > 1 {
			w.cmd.Process.Signal(syscall.SIGCONT)
			w.cmd.Process.Kill()
		}
	}
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	reaped := false
	select {
	case <-done:
		reaped = true
	case <-time.After(10 * time.Second):
		c.t.Errorf("wrappers not reaped 10s after SIGKILL")
	}
	for _, p := range proctest.WithEnv(drv.Marker(c.res)) {
		if p.PID > 1 {
			syscall.Kill(p.PID, syscall.SIGCONT)
			syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
	c.cl.Close()
	if c.net != nil {
		c.net.Close()
	}
	if reaped {
		proctest.ReapOrphans()
	}
}

// checkLog checks the fenced log (drv.Check; see TestEtcdChaos) and
// keeps the terms for the report; then that no COMMAND of any term still
// runs.
func (c *chaos) checkLog() {
	t := c.t
	terms, err := drv.Check(c.res, drv.Checks{Violation: c.violation, Before: c.eventsBefore})
	if err != nil {
		t.Fatal(err)
	}
	if len(terms) == 0 {
		t.Fatal("no COMMAND ever ran")
	}
	c.terms = terms
	// A pid alone does not name a process for ten minutes (pid_max may
	// be 32768, and other tests run): a COMMAND left running is one of
	// these pids that still carries the run's marker in its environment.
	marked := map[int]bool{}
	for _, p := range proctest.WithEnv(drv.Marker(c.res)) {
		marked[p.PID] = true
	}
	for _, tm := range terms {
		if marked[tm.PID] && oslock.StateOf(tm.PID) != oslock.ProcGone {
			c.violation("COMMAND pid %d still runs after every wrapper exited", tm.PID)
		}
	}
}

// waiterFaultBefore reports whether another wrapper was killed or stopped
// in the TTL and a second before s: such a waiter may still hold its
// place in the queue, ahead of the live ones, until its session's lease
// expires.
func (c *chaos) waiterFaultBefore(s signalled) bool {
	for _, o := range c.signals {
		if o.pid != s.pid && o.at <= s.at && o.at > s.at-int64(4*time.Second) {
			return true
		}
	}
	return false
}

// overBound says how a stall from begin to end went past the documented
// bounds, or "": a stall must end within -etcdchaos.stallbound (TTL + 1s)
// of its beginning and of the last stop, kill or cut-off of a wrapper
// (which, ahead in the line, keeps its place until its lease expires, a
// TTL after its last renewal) or the heal of a host, and within
// -etcdchaos.faultbound (TTL + 3s) of the end of the last etcd fault (a
// new raft leader extends every lease by the TTL and its election
// timeout). Only the events in the TTL and a second before begin count.
func (c *chaos) overBound(begin, end int64) string {
	ttlD, _ := time.ParseDuration(ttl)
	from := begin - int64(ttlD+time.Second)
	allowed, why := begin+int64(*chaosStall), fmt.Sprintf("its beginning + %v", *chaosStall)
	later := func(at int64, d time.Duration, what string) {
		if at >= from && at <= end && at+int64(d) > allowed {
			allowed, why = at+int64(d), fmt.Sprintf("%s + %v", what, d)
		}
	}
	for _, s := range c.signals {
		later(s.at, *chaosStall, fmt.Sprintf("the %v of wrapper %d", s.sig, s.pid))
	}
	for _, f := range c.parts {
		later(f.start, *chaosStall, f.what)
		if f.end != 0 {
			later(f.end, *chaosStall, "its heal")
		}
	}
	for _, f := range c.faults {
		switch {
		case f.start > end || (f.end != 0 && f.end < from):
		case f.end == 0 || f.end > end:
			return "" // it still lasted: no bound
		default:
			later(max(f.end, from), *chaosFault, "the end of "+f.what)
		}
	}
	if end <= allowed {
		return ""
	}
	return fmt.Sprintf("%v after %s", time.Duration(end-allowed).Round(time.Millisecond), why)
}

// sinceLastFault returns how long a stall from begin to end went on after
// the last thing that may hold the name up (its beginning, a wrapper's
// stop or kill, a cut or heal, an etcd fault's end), and what that was.
func (c *chaos) sinceLastFault(begin, end int64) (time.Duration, string) {
	ttlD, _ := time.ParseDuration(ttl)
	from := begin - int64(ttlD+time.Second)
	last, what := begin, "its beginning"
	note := func(at int64, w string) {
		if at >= from && at <= end && at > last {
			last, what = at, w
		}
	}
	for _, s := range c.signals {
		note(s.at, fmt.Sprintf("the %v of wrapper %d", s.sig, s.pid))
	}
	for _, f := range c.parts {
		note(f.start, f.what)
		note(f.end, "the heal of host "+f.host)
	}
	for _, f := range c.faults {
		note(f.end, "the end of "+f.what)
	}
	return time.Duration(end - last), what
}

// stallFrom says where a stall began: the previous term's last write, or
// the waiter's start.
func (c *chaos) stallFrom(prev drv.Term, from int64, w *wrapper) string {
	if w.startNs > from {
		return "its start"
	}
	return fmt.Sprintf("the last write of term %d (wrapper %d on %s, last %s)", prev.Epoch, prev.Wrapper, prev.Host, prev.LastKind)
}

// partsHeld says, of the partitions, how many cut the leader's host off
// while its COMMAND ran (from the log's terms).
func (c *chaos) partsHeld() string {
	var held int
	for _, f := range c.parts {
		for _, tm := range c.terms {
			if tm.Host == f.host && tm.Start <= f.start && tm.End >= f.start {
				held++
				break
			}
		}
	}
	return fmt.Sprintf("%d of them of the leader's host", held)
}

// report logs the figures of the run.
func (c *chaos) report() {
	t := c.t
	terms := c.terms
	var killFail, killFailFault, stopRanOn, stopFail []time.Duration
	for _, s := range c.signals {
		if !s.leader {
			continue
		}
		var next *drv.Term
		var own *drv.Term
		for i := range terms {
			if terms[i].Epoch == s.epoch {
				own = &terms[i]
			}
			if terms[i].Start > s.at && terms[i].Wrapper != s.pid {
				next = &terms[i]
				break
			}
		}
		switch s.sig {
		case syscall.SIGKILL:
			if next == nil || own == nil || own.End < s.at-int64(10*time.Millisecond) {
				continue // its COMMAND had ended before the kill
			}
			d := time.Duration(next.Start - s.at)
			if c.faultDuring(s.at, next.Start) || c.cutDuring("", s.at, next.Start) || c.waiterFaultBefore(s) {
				killFailFault = append(killFailFault, d)
			} else {
				killFail = append(killFail, d)
			}
		case syscall.SIGSTOP:
			if own == nil || own.End < s.at || own.LastKind == "E" {
				continue // COMMAND ended by itself (before the deadline, or continued in time)
			}
			stopRanOn = append(stopRanOn, time.Duration(own.End-s.at))
			if next != nil && !c.faultDuring(s.at, next.Start) && !c.cutDuring("", s.at, next.Start) {
				stopFail = append(stopFail, time.Duration(next.Start-s.at))
			}
		}
	}
	var maxGap time.Duration
	// Stalls, one per gap between terms that a wrapper could have used,
	// by what was going on: an etcd fault within a lease, a partition
	// (of any host) within a lease, neither. A cut host's own waiters
	// cannot be granted while it is cut: their waits are not stalls.
	var stallFault, stallCut, stallQuiet []time.Duration
	var cutWait, worst, sinceFault time.Duration
	var sinceWhat string
	var worstWhat string
	perHost := map[string]int{}
	for i, tm := range terms {
		perHost[tm.Host]++
		if i == 0 {
			continue
		}
		from := terms[i-1].End
		maxGap = max(maxGap, time.Duration(tm.Start-from))
		// A stall: a wrapper that was never signalled waited while the
		// lock was free or held by a term that had ended (its COMMAND
		// gone, its holder dead or stopped).
		var stall time.Duration
		var stalled *wrapper
		for _, w := range c.procs {
			if w.fate != fateNone || w.startNs >= tm.Start || (w.exitNs != 0 && w.exitNs < tm.Start) {
				continue
			}
			d := time.Duration(tm.Start - max(from, w.startNs))
			if c.cutDuring(w.host, max(from, w.startNs), tm.Start) {
				cutWait = max(cutWait, d)
				continue
			}
			if d > stall {
				stall, stalled = d, w
			}
		}
		if stall > worst {
			worst = stall
			worstWhat = fmt.Sprintf("wrapper %d (#%d on %s) waited %v from %s until term %d of wrapper %d on %s started (%.3fs into the run); the test's last actions: %s",
				stalled.pid, stalled.i, stalled.host, stall.Round(time.Millisecond), c.stallFrom(terms[i-1], from, stalled), tm.Epoch, tm.Wrapper, tm.Host,
				float64(tm.Start-c.procs[0].startNs)/1e9, c.eventsBetween(tm.Start-int64(stall)-int64(time.Second), tm.Start))
		}
		begin := tm.Start - int64(stall)
		switch {
		case stall == 0:
		case c.faultDuring(from, tm.Start):
			stallFault = append(stallFault, stall)
		case c.cutDuring("", from, tm.Start):
			stallCut = append(stallCut, stall)
		default:
			stallQuiet = append(stallQuiet, stall)
		}
		if d, what := c.sinceLastFault(begin, tm.Start); stall > 0 && d > sinceFault {
			sinceFault, sinceWhat = d, what
		}
		if over := c.overBound(begin, tm.Start); stall > 0 && over != "" {
			t.Errorf("a stall over the documented bound, %s: wrapper %d (#%d on %s) waited from %s until term %d of wrapper %d on %s started (%.3fs into the run); the test's actions then: %s",
				over, stalled.pid, stalled.i, stalled.host, c.stallFrom(terms[i-1], from, stalled), tm.Epoch, tm.Wrapper, tm.Host,
				float64(tm.Start-c.procs[0].startNs)/1e9, c.eventsBetween(begin-int64(time.Second), tm.Start))
		}
	}
	t.Logf("etcdchaos figures: %d wrappers on 3 hosts, %d terms (A %d, B %d, C %d), epochs %d to %d, %d wrapper SIGKILLs (%d of the leader), %d wrapper SIGSTOPs (%d of the leader), etcd faults: %d member SIGKILL+restart, %d member SIGSTOP+CONT (%d of them the raft leader's, past the TTL), %d quorum losses, %d partitions of a member; %d partitions of a host (%s); 0 overlapping COMMANDs, 0 refused fenced writes (checked above)",
		len(c.procs), len(terms), perHost["A"], perHost["B"], perHost["C"], terms[0].Epoch, terms[len(terms)-1].Epoch, c.n.kills, c.n.leaderKills, c.n.stops, c.n.leaderStops, c.n.memberKills, c.n.memberStops+c.n.longStops, c.n.longStops, c.n.quorumLosses, c.n.memberCuts, len(c.parts), c.partsHeld())
	t.Logf("etcdchaos figures: stalls (per gap between terms, the longest wait of a wrapper never signalled while the name was free or held by an ended term): with no fault within a lease %s; with a partition %s; with an etcd fault %s; a cut host's own waiters (not stalls: they cannot be granted while cut) waited up to %v",
		drv.Quantiles(stallQuiet), drv.Quantiles(stallCut), drv.Quantiles(stallFault), cutWait.Round(time.Millisecond))
	if worst > 0 {
		t.Logf("etcdchaos figures: the longest stall: %s", worstWhat)
		t.Logf("etcdchaos figures: the longest a stall went on after its beginning or the last fault near it (what the bounds measure): %v, after %s", sinceFault.Round(time.Millisecond), sinceWhat)
	}
	t.Logf("etcdchaos figures: leader SIGKILL to the next COMMAND's start, no etcd fault near and no waiter killed or stopped in the TTL before: %s; others (the queue waits for a dead waiter's lease, or etcd recovers): %s", drv.Quantiles(killFail), drv.Quantiles(killFailFault))
	t.Logf("etcdchaos figures: leader SIGSTOP to the last write of its COMMAND, stopped by the watchdog: %s; to the next COMMAND's start (no etcd fault near): %s; longest gap between terms %v",
		drv.Quantiles(stopRanOn), drv.Quantiles(stopFail), maxGap.Round(time.Millisecond))
	codes := map[string]int{}
	for _, w := range c.procs {
		k := fmt.Sprintf("%v:exit %d", w.fate, w.status.ExitStatus())
		if w.status.Signaled() {
			k = fmt.Sprintf("%v:%v", w.fate, w.status.Signal())
		}
		codes[k]++
	}
	t.Logf("etcdchaos exits (what the test did to the wrapper: how it ended): %v", codes)
}
