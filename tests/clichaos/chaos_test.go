package clichaos

import (
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

	"github.com/leaderrun/leaderrun/internal/chaos"
	"github.com/leaderrun/leaderrun/internal/proctest"
	"github.com/leaderrun/leaderrun/oslock"
)

var (
	cliChaosDuration = flag.Duration("clichaos.duration", 8*time.Second, "how long TestCLIChaos injects faults; e.g. 2m for a soak")
	cliChaosSeed     = flag.Uint64("clichaos.seed", 0, "seed for TestCLIChaos's choices; 0 picks one (it is logged)")
	cliChaosKeep     = flag.Bool("clichaos.keep", false, "keep TestCLIChaos's log and wrapper output (the directory is logged)")
)

// TestCLIChaos runs many leaderrun instances on one name whose COMMAND (the
// test binary in the COMMAND role of internal/chaos) checks that it is the only one
// running and appends to a fenced log, while at random moments instances
// join, a wrapper (leading or waiting) gets SIGKILL, which only Pdeathsig
// and the orphan fence can answer, or SIGTERM, or a --steal instance
// preempts the leader. Some COMMANDs leave a grandchild behind, in their
// process group or in a session of their own, some ignoring SIGTERM; some
// instances restart a failing COMMAND.
//
// Afterwards it checks: no COMMAND found another still running (at no
// instant did two run), no write was fenced off, epochs increase strictly
// from term to term in log order and each belongs to one wrapper; every
// wrapper exited with a status its fate explains; and after a last
// instance has led, no process of any term is left.
func TestCLIChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process chaos; skipped with -short")
	}
	bin := chaos.Bin // see TestMain
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	seed := *cliChaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("clichaos: duration %v, seed %d (rerun with -clichaos.seed=%d)", *cliChaosDuration, seed, seed)
	tmp := t.TempDir()
	if *cliChaosKeep {
		if tmp, err = os.MkdirTemp("", "clichaos-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("clichaos: keeping %s", tmp)
	}
	c := &cliChaos{
		t:    t,
		rng:  rand.New(rand.NewPCG(seed, seed>>1|1)),
		bin:  bin,
		self: self,
		dir:  filepath.Join(tmp, "locks"),
		res:  filepath.Join(tmp, "res"),
		log:  chaos.NewTail(filepath.Join(tmp, "res")),
		out:  filepath.Join(tmp, "out"),
	}
	for _, d := range []string{c.dir, c.res, c.out} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(c.killAll)

	const minLive, maxLive = 12, 18
	for range minLive {
		c.spawn(false)
	}
	end := time.Now().Add(*cliChaosDuration)
	for time.Now().Before(end) && !t.Failed() {
		d := time.Duration(5+c.rng.IntN(35)) * time.Millisecond
		slept := time.Now()
		time.Sleep(d)
		if over := time.Since(slept) - d; over > 100*time.Millisecond {
			// The machine was starved: nothing ran on time, and a gap
			// then says nothing of leaderrun.
			c.starved = append(c.starved, [2]int64{slept.UnixNano(), time.Now().UnixNano()})
		}
		c.act(minLive, maxLive)
	}
	c.continueDue(true)
	c.drain()
	c.checkLog()
	if !t.Failed() {
		c.report()
	}
}

// The stall bound is the longest the name may stay free, or held by a term
// that is dead or being fenced, while a wrapper could take its turn: by
// design 100ms, plus the fence of a killed term (its COMMAND and
// grandchildren, some ignoring SIGTERM, get --grace, 150ms here, and then
// SIGKILL, and the kill and reap of its process group, which takes
// longer on a loaded machine), plus COMMAND's start and first write (a
// process exec'd on a busy machine): 1s, which the soak command passes
// (the 10-minute soak measured p99 140ms, max 768ms); elect.StallBound's
// passing of stopped waiters is inside it. The short run of go test ./...
// allows 2s, as the machine is shared by every package's tests there.
var cliChaosStallBound = flag.Duration("clichaos.stallbound", 2*time.Second, "TestCLIChaos fails when a wrapper could run while the name was free for longer; the documented soak passes 1s")

// stalls returns, for every gap between consecutive terms, how long the
// name stayed free (or held by a dead term being fenced) while some
// wrapper other than the last holder could have taken it: from the later
// of the gap's start and the moment that wrapper last became runnable
// (started, or continued) to the next term's start, for the wrapper that
// waited longest so. A gap in which the last holder's wrapper was stopped
// is left out (a stopped holder keeps the lock, as documented); so is,
// counted in limit (their lengths too, to report), one in which two or more
// other wrappers were.
func (c *cliChaos) stalls() (out, limit []time.Duration, starved int, worst string) {
	var longest time.Duration
	terms := c.termsSeen
	for i := 1; i < len(terms); i++ {
		from, to := terms[i-1].End, terms[i].Start
		if c.stoppedWithin(terms[i-1].Wrapper, from, to) || c.stoppedWithin(terms[i].Wrapper, from, to) {
			// A stopped holder keeps the lock: not a dead term. The next
			// term's wrapper stopped in the gap was granted and stopped
			// before its COMMAND could start, or was passed and continued.
			continue
		}
		if slices.ContainsFunc(c.starved, func(st [2]int64) bool { return st[0] <= to && st[1] >= from }) {
			starved++
			continue
		}
		// The documented limit (two of the first waiters stopped): the
		// wrappers' places in line are not known here, so any two
		// stopped during the gap count, which errs on the side of
		// leaving out.
		stopped := 0
		for _, w := range c.procs {
			if w.pid != terms[i-1].Wrapper && w.stoppedWithin(from, to) {
				stopped++
			}
		}
		var gap time.Duration
		var who *wrapper
		for _, w := range c.procs {
			since, ok := w.runnableSince(to)
			if w.pid == terms[i-1].Wrapper || !ok {
				continue
			}
			if d := time.Duration(to - max(from, since)); d > gap {
				gap, who = d, w
			}
		}
		if who == nil {
			continue
		}
		if stopped >= 2 {
			limit = append(limit, gap)
			continue
		}
		out = append(out, gap)
		if gap > longest {
			longest = gap
			worst = fmt.Sprintf("from epoch %d (wrapper %d) to epoch %d (wrapper %d), wrapper %d runnable for all of it; the test's actions before: %s",
				terms[i-1].Epoch, terms[i-1].Wrapper, terms[i].Epoch, terms[i].Wrapper, who.pid, c.eventsBefore(to))
		}
	}
	return out, limit, starved, worst
}

// runnableSince returns since when w has been runnable (started, not
// exited, not stopped) without a break, as of ns; ok is false when it is
// not runnable at ns.
func (w *wrapper) runnableSince(ns int64) (since int64, ok bool) {
	if !w.runnable(ns) {
		return 0, false
	}
	since = w.startNs
	for _, st := range w.stops {
		if st[1] != 0 && st[1] <= ns {
			since = max(since, st[1])
		}
	}
	return since, true
}

// cliChaos is the orchestrator's state. Only the test goroutine changes
// it, except wrapper.status, which the reaper sets before closing exited.
type cliChaos struct {
	t             *testing.T
	rng           *rand.Rand
	bin, self     string // leaderrun, and the test binary as COMMAND
	dir, res, out string // lock directory, fenced resource, wrapper output
	procs         []*wrapper
	wg            sync.WaitGroup
	kills         []leaderKill
	n             struct{ kills, terms, steals, leaderKills, leaderTerms, stops, combined, deadStealers, dirFaults int }
	pendingCont   []timedWrapper // stopped wrappers to continue
	pendingKill   []timedWrapper // stealers to kill
	starved       [][2]int64     // times the test\'s own sleep overran by over 100ms
	log           *chaos.Tail
	leader        int // the wrapper whose COMMAND was seen starting last
	leaderEpoch   uint64
	termsSeen     []chaos.Term
	events        chaos.Events
}

func (c *cliChaos) event(format string, args ...any) { c.events.Add(format, args...) }

// eventsBefore returns the events in the second and a half before ns.
func (c *cliChaos) eventsBefore(ns int64) string {
	var exits []chaos.Event
	for _, w := range c.procs {
		if w.done() {
			exits = append(exits, chaos.Event{Nanos: w.exitNs, What: fmt.Sprintf("wrapper %d exited: %v", w.pid, w.status)})
		}
	}
	return c.events.Between(ns-int64(1500*time.Millisecond), ns, exits...)
}

type wrapper struct {
	i       int
	cmd     *exec.Cmd
	pid     int
	steal   bool
	flaky   bool           // its COMMAND fails now and then (--restart on-failure)
	sig     syscall.Signal // the signal we sent, 0 if none
	exited  chan struct{}
	status  syscall.WaitStatus
	waitErr error
	exitNs  int64
	startNs int64
	stops   [][2]int64 // SIGSTOP to SIGCONT, unix ns (0: not continued)
}

// runnable reports whether w could take its turn at ns: started, not
// exited, not stopped.
func (w *wrapper) runnable(ns int64) bool {
	if w.startNs > ns || w.exitNs != 0 && w.exitNs <= ns {
		return false
	}
	for _, st := range w.stops {
		if st[0] <= ns && (st[1] == 0 || st[1] > ns) {
			return false
		}
	}
	return true
}

type leaderKill struct {
	at  int64 // unix ns
	pid int
	sig syscall.Signal
}

// spawn starts one leaderrun with a random COMMAND behaviour.
func (c *cliChaos) spawn(steal bool) *wrapper {
	t := c.t
	w := &wrapper{i: len(c.procs), steal: steal, exited: make(chan struct{})}
	args := []string{"--dir", c.dir, "--name", "chaos", "--grace", "150ms"}
	spec := chaos.Spec{Res: c.res, Dir: c.dir, Hold: time.Duration(5+c.rng.IntN(45)) * time.Millisecond}
	switch r := c.rng.IntN(10); {
	case r < 2:
		spec.Grandchild = "group"
	case r < 4:
		spec.Grandchild = "setsid"
	}
	spec.StubbornGrandchild = c.rng.IntN(2) == 0
	how := []string{spec.String()}
	if steal {
		args = append(args, "--steal")
	} else if c.rng.IntN(6) == 0 {
		args = append(args, "--restart", "on-failure")
		spec.Flaky = true
		w.flaky = true
	}
	env := spec.Env()
	// -test.run=^$: should the role ever not be recognised, COMMAND runs
	// no test rather than all of them.
	args = append(args, "--", c.self, "-test.run=^$")
	w.cmd = exec.Command(c.bin, args...)
	w.cmd.Env = env
	f, err := os.Create(filepath.Join(c.out, fmt.Sprintf("%05d", w.i)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A file, not a pipe: a leftover grandchild holding a pipe open must
	// not keep Wait from returning.
	w.cmd.Stdout, w.cmd.Stderr = f, f
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.pid = w.cmd.Process.Pid
	w.startNs = time.Now().UnixNano()
	c.procs = append(c.procs, w)
	c.event("start wrapper %d (#%d) %s", w.pid, w.i, strings.Join(append(args[6:len(args)-3], how...), " "))
	if steal {
		c.n.steals++
	}
	chaos.Reap(&c.wg, w.cmd, func(status syscall.WaitStatus, err error, ns int64) {
		w.status, w.waitErr, w.exitNs = status, err, ns
		close(w.exited)
	})
	return w
}

func (w *wrapper) done() bool { return chaos.Closed(w.exited) }

// live returns the wrappers that run and have not been signalled.
func (c *cliChaos) live() []*wrapper {
	var ws []*wrapper
	for _, w := range c.procs {
		if !w.done() && w.sig == 0 {
			ws = append(ws, w)
		}
	}
	return ws
}

// act injects one random fault or change.
func (c *cliChaos) act(minLive, maxLive int) {
	c.tail()
	live := c.live()
	if len(live) < minLive {
		c.spawn(false)
		return
	}
	var leader *wrapper
	for _, w := range live {
		if w.pid == c.leader {
			leader = w
		}
	}
	pick := func() *wrapper {
		// Half the faults hit the leader, where they matter most.
		if leader != nil && c.rng.IntN(2) == 0 {
			return leader
		}
		return live[c.rng.IntN(len(live))]
	}
	c.continueDue()
	switch r := c.rng.IntN(100); {
	case r < 20 && len(live) < maxLive:
		c.spawn(false)
	case r < 36:
		c.signal(pick(), syscall.SIGKILL)
	case r < 44:
		c.signal(pick(), syscall.SIGTERM)
	case r < 47 && len(live) < maxLive:
		c.spawn(true)
	case r < 49 && leader != nil:
		// Combined: 1 to 3 waiters stopped, then the leader killed (or
		// terminated); the stopped ones are continued later.
		c.stopWaiters(live, leader, 1+c.rng.IntN(3))
		sig := syscall.SIGKILL
		if c.rng.IntN(3) == 0 {
			sig = syscall.SIGTERM
		}
		c.signal(leader, sig)
		c.n.combined++
	case r < 52 && len(live) < maxLive:
		// Combined: a stealer killed at a random point of its steal.
		s := c.spawn(true)
		c.pendingKill = append(c.pendingKill, timedWrapper{w: s, at: time.Now().Add(time.Duration(c.rng.IntN(300)) * time.Millisecond)})
		c.n.deadStealers++
	case r < 54:
		c.stopWaiters(live, leader, 1)
	case r < 55 && c.rng.IntN(3) == 0:
		// Combined: the lock directory removed or moved away (and made
		// again, as a user would) under a leader whose COMMAND may take
		// its --grace to stop, with waiters waiting and maybe stopped.
		c.replaceDir(c.rng.IntN(2) == 0)
	}
	now := time.Now()
	keep := c.pendingKill[:0]
	for _, k := range c.pendingKill {
		if now.After(k.at) {
			c.signal(k.w, syscall.SIGKILL)
		} else {
			keep = append(keep, k)
		}
	}
	c.pendingKill = keep
}

// replaceDir removes the lock directory (rm -rf; rm again while a waiter
// puts a ticket back) or moves it away, and makes it again, private. The
// holder notices and ends its term (80 or 77); nobody leads in the new
// directory before its COMMAND is gone (the claim); waiters rejoin.
func (c *cliChaos) replaceDir(move bool) {
	c.n.dirFaults++
	if move {
		if err := os.Rename(c.dir, fmt.Sprintf("%s.old-%d", c.dir, c.n.dirFaults)); err != nil {
			c.t.Errorf("moving the lock directory away: %v", err)
			return
		}
		c.event("lock directory moved away")
	} else {
		for i := 0; ; i++ {
			err := os.RemoveAll(c.dir)
			if err == nil {
				break
			}
			if i == 100 {
				c.t.Errorf("removing the lock directory: %v", err)
				return
			}
		}
		c.event("lock directory removed")
	}
	if err := os.Mkdir(c.dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		c.t.Errorf("making the lock directory again: %v", err)
	}
}

type timedWrapper struct {
	w  *wrapper
	at time.Time
}

// stopWaiters sends SIGSTOP to up to n live wrappers other than the
// leader, to be continued 100ms to 0.8s later.
func (c *cliChaos) stopWaiters(live []*wrapper, leader *wrapper, n int) {
	for _, i := range c.rng.Perm(len(live)) {
		w := live[i]
		if n == 0 {
			return
		}
		if w == leader || w.stopped() || w.done() {
			continue
		}
		if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			continue
		}
		w.stops = append(w.stops, [2]int64{time.Now().UnixNano(), 0})
		c.event("SIGSTOP to wrapper %d", w.pid)
		c.n.stops++
		c.pendingCont = append(c.pendingCont, timedWrapper{w: w, at: time.Now().Add(time.Duration(100+c.rng.IntN(700)) * time.Millisecond)})
		n--
	}
}

// continueDue continues the stopped wrappers whose time has come (all of
// them with all).
func (c *cliChaos) continueDue(all ...bool) {
	now := time.Now()
	keep := c.pendingCont[:0]
	for _, p := range c.pendingCont {
		if len(all) > 0 || now.After(p.at) {
			p.w.cmd.Process.Signal(syscall.SIGCONT)
			p.w.stops[len(p.w.stops)-1][1] = time.Now().UnixNano()
			c.event("SIGCONT to wrapper %d", p.w.pid)
		} else {
			keep = append(keep, p)
		}
	}
	c.pendingCont = keep
}

// stoppedWithin reports whether wrapper pid was stopped at some time
// between from and to.
func (c *cliChaos) stoppedWithin(pid int, from, to int64) bool {
	for _, w := range c.procs {
		if w.pid == pid {
			return w.stoppedWithin(from, to)
		}
	}
	return false
}

func (w *wrapper) stoppedWithin(from, to int64) bool {
	for _, st := range w.stops {
		if st[0] <= to && (st[1] == 0 || st[1] >= from) {
			return true
		}
	}
	return false
}

func (w *wrapper) stopped() bool {
	return len(w.stops) > 0 && w.stops[len(w.stops)-1][1] == 0
}

// signal sends sig to the wrapper's pid only: never to its process group,
// for its COMMAND must be ended by leaderrun or, after SIGKILL, by
// Pdeathsig and the next leader's orphan fence.
func (c *cliChaos) signal(w *wrapper, sig syscall.Signal) {
	if w.sig != 0 || w.done() {
		return
	}
	w.sig = sig
	if sig == syscall.SIGKILL {
		c.n.kills++
	} else {
		c.n.terms++
	}
	if w.pid == c.leader {
		c.kills = append(c.kills, leaderKill{at: time.Now().UnixNano(), pid: w.pid, sig: sig})
		if sig == syscall.SIGKILL {
			c.n.leaderKills++
		} else {
			c.n.leaderTerms++
		}
	}
	c.event("%v to wrapper %d (leader %v)", sig, w.pid, w.pid == c.leader)
	if err := w.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		c.t.Errorf("signal %v to wrapper %d: %v", sig, w.pid, err)
	}
}

// tail reads what was appended to the fenced log since the last call, to
// know which wrapper leads: the one whose COMMAND started last, until it
// exits.
func (c *cliChaos) tail() {
	c.log.Read(func(r chaos.Line) {
		if r.Epoch >= c.leaderEpoch && r.Kind == "S" {
			c.leader, c.leaderEpoch = r.Wrapper, r.Epoch
		}
	})
}

// drain lets every wrapper left lead once and exit, then runs one more
// instance, whose orphan fence must end whatever a killed last leader
// left behind, and checks every exit status.
func (c *cliChaos) drain() {
	t := c.t
	wait := func(ws []*wrapper, d time.Duration) bool {
		deadline := time.After(d)
		for _, w := range ws {
			select {
			case <-w.exited:
			case <-deadline:
				var stuck []string
				for _, w := range ws {
					if !w.done() {
						stuck = append(stuck, fmt.Sprintf("wrapper %d (#%d, signalled %v)", w.pid, w.i, w.sig))
					}
				}
				t.Errorf("stuck: %d wrappers did not exit within %v: %s\n%s", len(stuck), d, strings.Join(stuck, ", "), c.diagnose(ws))
				return false
			}
		}
		return true
	}
	if !wait(c.procs, 30*time.Second+time.Duration(len(c.live()))*500*time.Millisecond) {
		return
	}
	last := c.spawn(false)
	if !wait([]*wrapper{last}, 30*time.Second) {
		return
	}
	c.wg.Wait()
	for _, w := range c.procs {
		if why := c.unexpectedExit(w); why != "" {
			out, _ := os.ReadFile(filepath.Join(c.out, fmt.Sprintf("%05d", w.i)))
			t.Errorf("wrapper %d (#%d, steal %v, signalled %v): %s; output: %q", w.pid, w.i, w.steal, w.sig, why, out)
		}
	}
	if ps := proctest.WithEnv("LEADERRUN_DIR=" + c.dir); len(ps) > 0 {
		t.Errorf("processes of earlier terms still run after a last instance led and exited: %s", proctest.Describe(ps, func(p proctest.Leftover) string { return p.Getenv(proctest.RoleEnv) }))
	}
}

// unexpectedExit says what is wrong with the way w ended, or "".
func (c *cliChaos) unexpectedExit(w *wrapper) string {
	ws := w.status
	anySteal := c.n.steals > 0
	if w.waitErr != nil && w.cmd.ProcessState == nil {
		return fmt.Sprintf("wait: %v", w.waitErr)
	}
	switch {
	case ws.Signaled() && ws.Signal() == w.sig:
		return "" // before its handler was set, for SIGTERM
	case ws.Signaled():
		if ws.Signal() == syscall.SIGKILL && anySteal {
			return "" // a stealer's KillAfter
		}
		return fmt.Sprintf("killed by %v, which the test did not send", ws.Signal())
	}
	switch code := ws.ExitStatus(); {
	case code == 0:
		return "" // also after a signal that came as it finished
	case (code == 80 || code == 77) && c.n.dirFaults > 0:
		return "" // it led when its lock directory was removed or moved
	case code == 79 && anySteal:
		return "" // stolen from
	case code == 128+int(syscall.SIGTERM) && w.sig == syscall.SIGTERM:
		return ""
	case code == chaos.ExitFlaky && w.flaky && w.sig == syscall.SIGTERM:
		return "" // COMMAND failed on its own as the SIGTERM came: its status is the exit's
	case code == chaos.ExitViolation:
		return "COMMAND saw a violation (see the log check)"
	default:
		return fmt.Sprintf("exit status %d", code)
	}
}

func (c *cliChaos) killAll() {
	for _, w := range c.procs {
		if !w.done() {
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
	// Whatever is left of any term, which a failed run may leave.
	ps := proctest.WithEnv("LEADERRUN_DIR=" + c.dir)
	for _, p := range ps {
		syscall.Kill(p.PID, syscall.SIGKILL)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range ps {
		for !gonePID(p.PID) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if !gonePID(p.PID) {
			c.t.Errorf("process %d of a term did not die of SIGKILL within 5s", p.PID)
		}
	}
	// This process is a child subreaper (package cmd's init, linked in
	// for leaderrun), so the orphans of killed wrappers were handed to it:
	// reap them, once every wrapper has been waited for.
	if reaped {
		proctest.ReapOrphans()
	}
}

// gonePID reports whether pid is gone: reaped, or a zombie none of whose
// threads still runs.
func gonePID(pid int) bool { return oslock.StateOf(pid) == oslock.ProcGone }

// checkLog checks the fenced log (chaos.Check, with --restart's
// several COMMANDs a term) and keeps the terms for the report.
func (c *cliChaos) checkLog() {
	terms, err := chaos.Check(c.res, chaos.Checks{Restarts: true, Violation: c.t.Errorf, Before: c.eventsBefore})
	if err != nil {
		c.t.Fatal(err)
	}
	if len(terms) == 0 {
		c.t.Fatal("no COMMAND ever ran")
	}
	c.termsSeen = terms
}

// report logs the figures of the run.
func (c *cliChaos) report() {
	t := c.t
	terms := c.termsSeen
	failover := map[syscall.Signal][]time.Duration{}
	for _, k := range c.kills {
		for _, tm := range terms {
			if tm.Start > k.at && tm.Wrapper != k.pid {
				failover[k.sig] = append(failover[k.sig], time.Duration(tm.Start-k.at))
				break
			}
		}
	}
	restarts, grandchildren := 0, 0
	var maxGap time.Duration
	for i, tm := range terms {
		restarts += tm.Commands - 1
		if tm.Grandchild {
			grandchildren++
		}
		if i > 0 {
			maxGap = max(maxGap, time.Duration(tm.Start-terms[i-1].End))
		}
	}
	fig := fmt.Sprintf("clichaos figures: %d leaderrun instances (%d --steal), %d terms (%d COMMAND restarts, %d terms with a grandchild left behind), %d SIGKILL (%d of the leader), %d SIGTERM (%d of the leader), 0 overlapping COMMANDs, 0 refused fenced writes (checked above)",
		len(c.procs), c.n.steals, len(terms), restarts, grandchildren, c.n.kills, c.n.leaderKills, c.n.terms, c.n.leaderTerms)
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		if f := failover[sig]; len(f) > 0 {
			fig += fmt.Sprintf("; leader %v to next COMMAND's start: %s", sig, chaos.Quantiles(f))
		}
	}
	fig += fmt.Sprintf("; longest gap between terms %v", maxGap.Round(time.Microsecond))
	fig += fmt.Sprintf("; combined faults: %d SIGSTOPs of waiters, %d leader kills with 1-3 waiters stopped, %d stealers killed mid-steal, %d lock directories removed or moved under a leader", c.n.stops, c.n.combined, c.n.deadStealers, c.n.dirFaults)
	if st, limit, starved, worst := c.stalls(); len(st) > 0 {
		fig += fmt.Sprintf("; stalls (free or dead-held name while a waiter could run, gaps): %s (bound %v); %d gaps with two or more waiters stopped left out as the documented limit (%s), %d while the test itself was starved (its sleep overran by over 100ms)",
			chaos.Quantiles(st), *cliChaosStallBound, len(limit), chaos.Quantiles(limit), starved)
		if st[len(st)-1] > *cliChaosStallBound {
			t.Errorf("a runnable waiter waited %v with the name free or held by a dead term (the bound is %v): %s", st[len(st)-1], *cliChaosStallBound, worst)
		}
	}
	t.Log(fig)
}

// diagnose describes the lock directory and the stuck wrappers, for a
// failure message: the queue as Query sees it, the raw queue directory,
// the kernel's flocks, and where each live wrapper's threads sleep.
func (c *cliChaos) diagnose(ws []*wrapper) string {
	var b strings.Builder
	if out, err := exec.Command(c.bin, "--dir", c.dir, "status", "--json").CombinedOutput(); err == nil {
		fmt.Fprintf(&b, "status: %s\n", out)
	}
	ents, _ := os.ReadDir(filepath.Join(c.dir, "chaos.queue"))
	for _, e := range ents {
		fmt.Fprintf(&b, "queue entry %s\n", e.Name())
	}
	if locks, err := os.ReadFile("/proc/locks"); err == nil {
		fmt.Fprintf(&b, "/proc/locks:\n%s", locks)
	}
	for _, w := range ws {
		if w.done() {
			continue
		}
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", w.pid))
		for _, task := range tasks {
			wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/wchan", w.pid, task.Name()))
			fmt.Fprintf(&b, "wrapper %d thread %s wchan %s\n", w.pid, task.Name(), wchan)
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", w.pid))
		for _, fd := range fds {
			l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", w.pid, fd.Name()))
			fmt.Fprintf(&b, "wrapper %d fd %s -> %s\n", w.pid, fd.Name(), l)
		}
	}
	return b.String()
}
