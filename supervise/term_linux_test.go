package supervise

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/layout"
	"github.com/leaderrun/leaderrun/internal/proctest"
	"github.com/leaderrun/leaderrun/oslock"
)

// Helper processes of the term tests, re-executions of the test binary
// with proctest.RoleEnv=helper and the role in os.Args[2]:
//
//	lr ARGS...     a supervisor as leaderrun is one (helperSupervisor)
//	leftover KIDS  COMMAND: starts the kids named in KIDS (a comma list of
//	               group, setsid, forker), writes "<kind> <pid>" lines and
//	               "ready" to T_PIDS, and sleeps until T_PIDS is removed
//	sleeper        sleeps
//	sweep          prepares a term and closes it
//	forker         leaves the process group, then keeps starting sleepers
//
// Every one of them gives up after a minute, so that a leak outlives no
// test by much.
func init() {
	if os.Getenv(proctest.RoleEnv) != "helper" || len(os.Args) < 3 {
		return
	}
	switch os.Args[2] {
	case "lr":
		os.Exit(helperSupervisor(os.Args[3:]))
	case "leftover":
		os.Exit(helperLeftover(os.Args[3]))
	case "sleeper":
		time.Sleep(time.Minute)
		os.Exit(0)
	case "sweep": // a new process's first Prepare sweeps (TestPreparedLeftBehind)
		Prepare("", false).Close()
		os.Exit(0)
	case "forker":
		for end := time.Now().Add(time.Minute); time.Now().Before(end); {
			c := helperCmd("sleeper")
			if c.Start() == nil {
				c.Process.Release()
			}
			time.Sleep(time.Millisecond)
		}
		os.Exit(0)
	}
}

// helperSupervisor does what leaderrun does around COMMAND, for the
// tests of the fence and the watchdog: ARGS are --dir DIR --name NAME
// --grace DURATION [--shared] [--prepared] -- COMMAND [ARG...]. It leads
// NAME in DIR (with --prepared, having prepared the term and its watchdog
// first, as leaderrun does while it waits), begins the term, runs COMMAND
// in it, and when COMMAND exits, or a terminating signal comes, stops it
// and ends the term.
func helperSupervisor(args []string) int {
	var dir, name string
	var prepared *Prepared
	grace, mode := time.Second, elect.Exclusive
	for len(args) > 1 && args[0] != "--" {
		switch args[0] {
		case "--dir":
			dir, args = args[1], args[1:]
		case "--name":
			name, args = args[1], args[1:]
		case "--grace":
			grace, _ = time.ParseDuration(args[1])
			args = args[1:]
		case "--shared":
			mode = elect.Shared
		case "--prepared":
			prepared = Prepare("", true)
		}
		args = args[1:]
	}
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "lr: no COMMAND after --")
		return 2
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, TerminatingSignals()...)
	lk, err := elect.Open(elect.Config{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "lr:", err)
		return 1
	}
	lead, err := lk.Acquire(context.Background(), name, elect.Request{Mode: mode})
	if err != nil {
		prepared.Close()
		fmt.Fprintln(os.Stderr, "lr:", err)
		return 1
	}
	defer lead.Release()
	tm := Begin(context.Background(), lead, dir, prepared)
	defer tm.End()
	env := append(os.Environ(), "LEADERRUN_DIR="+dir, "LEADERRUN_NAME="+name)
	ch, err := tm.Start(args[1:], tm.Environ(env), os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lr:", err)
		return 1
	}
	select {
	case <-ch.Done():
	case <-sigs:
	}
	ch.Stop(grace, sigs)
	return ch.Status()
}

func helperCmd(role string, args ...string) *exec.Cmd {
	c := exec.Command(os.Args[0], append([]string{"-test.run=^$", role}, args...)...)
	c.Env = os.Environ()
	return c
}

func helperLeftover(kids string) int {
	var out strings.Builder
	fmt.Fprintf(&out, "command %d\n", os.Getpid())
	for _, kind := range strings.Split(kids, ",") {
		var c *exec.Cmd
		switch kind {
		case "":
			continue
		case "group":
			c = helperCmd("sleeper")
		case "setsid":
			c = helperCmd("sleeper")
			c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		case "forker":
			c = helperCmd("forker")
			c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		}
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Fprintf(&out, "%s %d\n", kind, c.Process.Pid)
	}
	out.WriteString("ready\n")
	if err := os.WriteFile(os.Getenv("T_PIDS"), []byte(out.String()), 0o600); err != nil {
		return 2
	}
	// Until the test removes the file, or a minute.
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(os.Getenv("T_PIDS")); err != nil {
			return 0
		}
	}
	return 0
}

// wrapper is a leaderrun helper process and what its COMMAND started.
type wrapper struct {
	cmd     *exec.Cmd
	pids    map[string]int // command, group, setsid, forker
	id      string         // the term id
	pidFile string
}

// startWrapper runs leaderrun (flags, then the leftover COMMAND with kids)
// on name in dir and waits until COMMAND has started its kids. env is
// added to the helper's environment (TEST_LEADERRUN_FENCE).
func startWrapper(t *testing.T, dir, name, kids string, env []string, flags ...string) *wrapper {
	t.Helper()
	pids := filepath.Join(t.TempDir(), "pids")
	args := append([]string{"--dir", dir, "--name", name, "--grace", "100ms"}, flags...)
	args = append(args, "--", os.Args[0], "-test.run=^$", "leftover", kids)
	c := helperCmd("lr", args...)
	c.Env = append(c.Env, proctest.RoleEnv+"=helper", "T_PIDS="+pids)
	c.Env = append(c.Env, env...)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	w := &wrapper{cmd: c, pids: map[string]int{}, pidFile: pids}
	t.Cleanup(func() {
		c.Process.Kill()
		c.Wait()
		// What the test left of the term (its cgroup, with the
		// watchdog switched off) goes as a successor would end it.
		if d, err := oslock.OpenDir(dir, oslock.DirOptions{}); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			fenceDir(ctx, d, name, true)
			cancel()
			d.Close()
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(pids)
		if strings.HasSuffix(string(b), "ready\n") {
			for _, line := range strings.Split(string(b), "\n") {
				if k, v, ok := strings.Cut(line, " "); ok {
					w.pids[k], _ = strconv.Atoi(v)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leaderrun's COMMAND did not start its kids within 20s (%s)", b)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, pid := range w.pids {
		proctest.EndPID(t, pid)
	}
	cenv, _ := os.ReadFile("/proc/" + strconv.Itoa(w.pids["command"]) + "/environ")
	for _, kv := range strings.Split(string(cenv), "\x00") {
		if v, ok := strings.CutPrefix(kv, termEnv+"="); ok {
			w.id = v
		}
	}
	if !validTermID(w.id) {
		t.Fatalf("COMMAND has no term id in its environment")
	}
	return w
}

// crash kills the wrapper with SIGKILL and waits until it is gone.
func (w *wrapper) crash(t *testing.T) {
	t.Helper()
	w.cmd.Process.Kill()
	w.cmd.Wait()
}

// waitGoneAll waits, up to d, until every pid is gone (a zombie or no
// entry at all), and reports those that are not.
func waitGoneAll(pids []int, d time.Duration) []int {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var alive []int
	for _, pid := range pids {
		if oslock.WaitGone(ctx, pid) != nil {
			alive = append(alive, pid)
		}
	}
	return alive
}

func running(pid int) bool { return oslock.StateOf(pid) != oslock.ProcGone }

func (w *wrapper) all() []int {
	var out []int
	for _, pid := range w.pids {
		out = append(out, pid)
	}
	return out
}

// termLockDir makes a private lock directory.
func termLockDir(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "locks")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// succeed is the next leader's fence: beginTerm, as run calls it, and the
// end of that term.
func succeed(t *testing.T, dir, name string, exclusive bool) {
	t.Helper()
	tm := beginTerm(t.Context(), dir, name, exclusive, nil)
	if tm == nil {
		t.Fatal("beginTerm could not mark the term")
	}
	tm.End()
}

// fenceModes runs f with the cgroup (where this machine has a writable
// one) and with the fallback on the process group and the term id.
func fenceModes(t *testing.T, f func(t *testing.T, env []string)) {
	t.Run("cgroup", func(t *testing.T) {
		if newTermCgroupProbe() == "" {
			t.Skip("no writable cgroup v2 with cgroup.kill here")
		}
		f(t, []string{"TEST_LEADERRUN_FENCE=nowatchdog"})
	})
	t.Run("nocgroup", func(t *testing.T) {
		f(t, []string{"TEST_LEADERRUN_FENCE=nowatchdog,nocgroup"})
	})
}

func newTermCgroupProbe() string {
	if noCgroup {
		return ""
	}
	cg := newTermCgroup(strings.Repeat("0", termIDLen))
	if cg == nil {
		return ""
	}
	cg.remove(context.Background())
	return cg.path
}

// TestFenceCrashedLeader: leaderrun SIGKILLed while leading (its watchdog
// switched off, so that only the next leader acts); the next leader's
// fence ends COMMAND, a kid in its process group and one that called
// setsid before it returns.
func TestFenceCrashedLeader(t *testing.T) {
	fenceModes(t, func(t *testing.T, env []string) {
		dir := termLockDir(t)
		w := startWrapper(t, dir, "job", "group,setsid", env)
		w.crash(t)
		succeed(t, dir, "job", true)
		for kind, pid := range w.pids {
			if running(pid) {
				t.Errorf("%s %d still runs after the next leader's fence", kind, pid)
			}
		}
		if names, _ := filepath.Glob(filepath.Join(dir, "job.cmd.*")); len(names) != 0 {
			t.Errorf("markers left: %v", names)
		}
	})
}

// TestFenceSharedLeftover: a SIGKILLed shared holder's leftovers are
// fenced by an exclusive leader that follows it.
func TestFenceSharedLeftover(t *testing.T) {
	fenceModes(t, func(t *testing.T, env []string) {
		dir := termLockDir(t)
		w := startWrapper(t, dir, "job", "group,setsid", env, "--shared")
		w.crash(t)
		succeed(t, dir, "job", true)
		for kind, pid := range w.pids {
			if running(pid) {
				t.Errorf("%s %d of the crashed shared term still runs", kind, pid)
			}
		}
	})
}

// TestFenceLiveSharedTerm: of two shared holders, one is SIGKILLed; a new
// shared holder's fence ends its leftovers and leaves the live holder's
// COMMAND and kids alone.
func TestFenceLiveSharedTerm(t *testing.T) {
	fenceModes(t, func(t *testing.T, env []string) {
		dir := termLockDir(t)
		dead := startWrapper(t, dir, "job", "group,setsid", env, "--shared")
		live := startWrapper(t, dir, "job", "group,setsid", env, "--shared")
		dead.crash(t)
		succeed(t, dir, "job", false)
		for kind, pid := range dead.pids {
			if running(pid) {
				t.Errorf("%s %d of the crashed shared term still runs", kind, pid)
			}
		}
		for kind, pid := range live.pids {
			if !running(pid) {
				t.Errorf("%s %d of the live shared term was killed", kind, pid)
			}
		}
	})
}

// TestFenceForkingLeftover: a leftover that left the process group and
// keeps starting processes is ended, with all it started, before the fence
// returns.
func TestFenceForkingLeftover(t *testing.T) {
	fenceModes(t, func(t *testing.T, env []string) {
		dir := termLockDir(t)
		w := startWrapper(t, dir, "job", "forker", env)
		// Let it fork a while, so that its children are in flight.
		time.Sleep(50 * time.Millisecond)
		w.crash(t)
		succeed(t, dir, "job", true)
		if left := termProcesses(t, w.id); len(left) > 0 {
			t.Errorf("processes of the crashed term still run after the fence: %v", left)
		}
	})
}

// termProcesses lists the living processes that carry the term id, and
// ends them at cleanup.
func termProcesses(t *testing.T, id string) []int {
	pids, _ := scanTerm([]byte(termEnv+"="+id), make([]byte, 256<<10), 0, 0)
	for _, pid := range pids {
		proctest.EndPID(t, pid)
	}
	return pids
}

// TestFenceOtherDirectory: a process that carries this directory's
// LEADERRUN_DIR and LEADERRUN_NAME, but another term's id (a live COMMAND
// of another directory spelled the same: a private /tmp), survives the
// fence of a crashed term here; and a term begun through a symlinked
// parent is fenced through the real path.
func TestFenceOtherDirectory(t *testing.T) {
	fenceModes(t, func(t *testing.T, env []string) {
		dir := termLockDir(t)
		link := filepath.Join(t.TempDir(), "link")
		if err := os.Symlink(filepath.Dir(dir), link); err != nil {
			t.Fatal(err)
		}
		w := startWrapper(t, filepath.Join(link, "locks"), "job", "group", env)
		other := helperCmd("sleeper")
		other.Env = append(other.Env, proctest.RoleEnv+"=helper", "LEADERRUN_DIR="+dir, "LEADERRUN_NAME=job",
			"LEADERRUN_PID="+strconv.Itoa(w.cmd.Process.Pid), termEnv+"="+strings.Repeat("cd", termIDLen/2))
		if err := other.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			other.Process.Kill()
			other.Wait()
		})
		w.crash(t)
		succeed(t, dir, "job", true)
		for kind, pid := range w.pids {
			if running(pid) {
				t.Errorf("%s %d of the term begun through a symlink still runs", kind, pid)
			}
		}
		if !running(other.Process.Pid) {
			t.Error("the fence killed a process of another term that only shares the directory's name")
		}
	})
}

// TestFenceDyingWrapper: the kernel drops a killed leaderrun's flock
// before the process is gone, so the next holder often finds the marker of
// a leaderrun that still runs (here a stand-in that holds no lock): it is
// fenced, by an exclusive and by a shared successor alike, while a shared
// holder's term is spared only as long as it holds the lock
// (TestFenceLiveSharedTerm).
func TestFenceDyingWrapper(t *testing.T) {
	for _, exclusive := range []bool{true, false} {
		t.Run(fmt.Sprintf("exclusive=%v", exclusive), func(t *testing.T) {
			dir := termLockDir(t)
			if err := os.WriteFile(filepath.Join(dir, "job.lock"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			// A lock of our own, so that /proc/locks is not empty.
			other, err := os.Create(filepath.Join(t.TempDir(), "other"))
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX); err != nil {
				t.Fatal(err)
			}
			start := func(env ...string) *exec.Cmd {
				c := helperCmd("sleeper")
				c.Env = append(c.Env, append(env, proctest.RoleEnv+"=helper")...)
				c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					c.Process.Kill()
					c.Wait()
				})
				return c
			}
			id := strings.Repeat("5a", termIDLen/2)
			wrapper := start()
			command := start(termEnv + "=" + id)
			r := &termRecord{id: id, wpid: wrapper.Process.Pid, pidns: selfPidNS, commandStarted: true, cpid: command.Process.Pid, pgid: command.Process.Pid}
			if !waitStarted(r) {
				t.Fatal("no start time in /proc for a process just started")
			}
			if err := os.WriteFile(filepath.Join(dir, layout.TermMarkerPrefix("job")+id), []byte(r.String()), 0o600); err != nil {
				t.Fatal(err)
			}
			succeed(t, dir, "job", exclusive)
			if running(command.Process.Pid) {
				t.Error("the COMMAND of a term whose leaderrun holds no lock still runs after the fence")
			}
			if !running(wrapper.Process.Pid) {
				t.Error("the fence killed the (stand-in) leaderrun itself")
			}
		})
	}
}

// TestFenceForeignPidNamespace: the pids of a marker written in another
// pid namespace (a container sharing the directory) name other processes
// here: nothing is sent to them.
func TestFenceForeignPidNamespace(t *testing.T) {
	c := helperCmd("sleeper")
	c.Env = append(c.Env, proctest.RoleEnv+"=helper")
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Process.Kill()
		c.Wait()
	})
	r := &termRecord{id: strings.Repeat("6b", termIDLen/2), wpid: c.Process.Pid, pidns: selfPidNS + 1,
		commandStarted: true, cpid: c.Process.Pid, pgid: c.Process.Pid}
	var ok bool
	if r.cstart, ok = procStart(r.cpid); !ok {
		t.Fatal("no start time in /proc for a process just started")
	}
	r.wstart = r.cstart
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	fenceTerm(ctx, r)
	if !running(c.Process.Pid) {
		t.Error("the fence killed a process by a pid recorded in another pid namespace")
	}
}

// waitStarted fills in the start times of r's processes and reports
// whether /proc had them.
func waitStarted(r *termRecord) bool {
	var ok1, ok2 bool
	r.wstart, ok1 = procStart(r.wpid)
	r.cstart, ok2 = procStart(r.cpid)
	return ok1 && ok2
}

// TestWatchdogNoSuccessor: leaderrun SIGKILLed with nobody waiting; its
// watchdog ends COMMAND's kids, in its group and in a session of their
// own, and removes the marker.
// With --prepared, the watchdog is the one started while the term was
// prepared, which the term began.
func TestWatchdogNoSuccessor(t *testing.T) {
	for _, mode := range []string{"cgroup", "nocgroup", "cgroup,prepared", "nocgroup,prepared"} {
		t.Run(mode, func(t *testing.T) {
			if strings.HasPrefix(mode, "cgroup") && newTermCgroupProbe() == "" {
				t.Skip("no writable cgroup v2 with cgroup.kill here")
			}
			env := []string{"TEST_LEADERRUN_FENCE=" + strings.TrimPrefix(strings.TrimSuffix(mode, ",prepared"), "cgroup")}
			var flags []string
			if strings.HasSuffix(mode, ",prepared") {
				flags = []string{"--prepared"}
			}
			dir := termLockDir(t)
			w := startWrapper(t, dir, "job", "group,setsid", env, flags...)
			wd := watchdogOf(t, w.cmd.Process.Pid)
			w.crash(t)
			if alive := waitGoneAll(w.all(), 10*time.Second); len(alive) > 0 {
				t.Errorf("still running 10s after their leaderrun was killed: %v (pids %v)", alive, w.pids)
			}
			if alive := waitGoneAll([]int{wd}, 10*time.Second); len(alive) > 0 {
				t.Fatalf("the watchdog %d did not exit within 10s", wd)
			}
			if names, _ := filepath.Glob(filepath.Join(dir, "job.cmd.*")); len(names) != 0 {
				t.Errorf("the watchdog left the marker: %v", names)
			}
		})
	}
}

// TestWatchdogCleanEnd: a term that ends cleanly tells its watchdog,
// which exits without touching anything.
func TestWatchdogCleanEnd(t *testing.T) {
	dir := termLockDir(t)
	w := startWrapper(t, dir, "job", "group", nil)
	wd := watchdogOf(t, w.cmd.Process.Pid)
	os.Remove(w.pidFile) // COMMAND exits; leaderrun stops the kid
	done := make(chan error, 1)
	go func() { done <- w.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("leaderrun: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("leaderrun did not exit within 20s of its COMMAND")
	}
	if alive := waitGoneAll([]int{wd}, 10*time.Second); len(alive) > 0 {
		t.Fatalf("the watchdog %d did not exit within 10s of a clean end", wd)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "job.cmd.*")); len(names) != 0 {
		t.Errorf("markers left after a clean end: %v", names)
	}
	if left := termProcesses(t, w.id); len(left) > 0 {
		t.Errorf("processes of the term left after a clean end: %v", left)
	}
}

// watchdogOf waits until leaderrun pid has started its watchdog (after
// watchdogDelay) and returns the watchdog's pid.
func watchdogOf(t *testing.T, pid int) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		for _, task := range tasks {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/children")
			for _, f := range strings.Fields(string(b)) {
				k, _ := strconv.Atoi(f)
				if cl := oslock.Cmdline(k); len(cl) > 0 && cl[0] == "leaderrun-watchdog" {
					proctest.EndPID(t, k)
					return k
				}
			}
		}
	}
	t.Fatalf("leaderrun %d started no watchdog within 10s", pid)
	return 0
}

// TestParseTermRecord: a marker rewritten shorter keeps the tail of its
// longer version until the truncate; that tail is ignored.
func TestParseTermRecord(t *testing.T) {
	r := &termRecord{id: strings.Repeat("0f", termIDLen/2), wpid: 12, wstart: 34, cgroup: "/sys/fs/cgroup/x/leaderrun-" + strings.Repeat("0f", termIDLen/2),
		commandStarted: true, cpid: 56, cstart: 78, pgid: 56}
	long := r.String()
	r.cgroup = ""
	short := r.String()
	got, err := parseTermRecord([]byte(short + long[len(short):]))
	if err != nil || got.String() != short {
		t.Errorf("parse(%q) = %v, %v; want %q", short+long[len(short):], got, err, short)
	}
	for _, bad := range []string{"", "12\n", termHeader + "\nid 12\nwrapper 1 2\n.\n", strings.TrimSuffix(short, ".\n")} {
		if _, err := parseTermRecord([]byte(bad)); err == nil {
			t.Errorf("parse(%q) succeeded", bad)
		}
	}
}

// TestProcStart: the start time of a process (oslock.StatField parses
// the line; see its test) and the match of a whole environment entry.
func TestProcStart(t *testing.T) {
	if pid, ok := procStart(os.Getpid()); !ok || pid == 0 {
		t.Errorf("procStart(self) = %d, %v", pid, ok)
	}
	if !hasEntry([]byte("A=1\x00"+termEnv+"=x\x00B=2"), []byte(termEnv+"=x")) || hasEntry([]byte("XX"+termEnv+"=xy\x00"), []byte(termEnv+"=x")) {
		t.Error("hasEntry matches part of an entry, or misses a whole one")
	}
}

// TestTermStartOutsideCgroup: where COMMAND cannot be started in the
// term's cgroup after all (here: a descriptor that is no cgroup), it is
// started without, the cgroup is removed and the marker no longer names
// it.
func TestTermStartOutsideCgroup(t *testing.T) {
	if newTermCgroupProbe() == "" {
		t.Skip("no writable cgroup v2 with cgroup.kill here")
	}
	dir := termLockDir(t)
	tm := beginTerm(t.Context(), dir, "job", true, nil)
	if tm == nil || tm.cg == nil {
		t.Fatal("no term, or no cgroup for it")
	}
	defer tm.End()
	cg := tm.cg
	real := cg.dir
	defer real.Close()
	notCgroup, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cg.dir = notCgroup // closed by the fallback
	ch, err := tm.Start([]string{"true"}, os.Environ(), io.Discard)
	if err != nil {
		t.Fatalf("COMMAND did not start without the cgroup: %v", err)
	}
	if tm.cg != nil {
		t.Error("the term still has a cgroup COMMAND could not start in")
	}
	if _, err := os.Stat(cg.path); !os.IsNotExist(err) {
		t.Errorf("the unusable cgroup %s was not removed: %v", cg.path, err)
	}
	select {
	case <-ch.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("true did not exit within 10s")
	}
	r, err := readMarker(tm.d, tm.file)
	if err != nil {
		t.Fatal(err)
	}
	if r.cgroup != "" || !r.commandStarted {
		t.Errorf("marker after a start outside the cgroup: %+v", r)
	}
}

// TestFenceCgroupNotHere: a marker whose cgroup this process cannot see
// (written in another cgroup or mount namespace) is fenced through the
// process group and the term id instead.
func TestFenceCgroupNotHere(t *testing.T) {
	id := strings.Repeat("7c", termIDLen/2)
	c := helperCmd("sleeper")
	c.Env = append(c.Env, proctest.RoleEnv+"=helper", termEnv+"="+id)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Process.Kill()
		c.Wait()
	})
	r := &termRecord{id: id, wpid: c.Process.Pid, pidns: selfPidNS, cgroup: "/sys/fs/cgroup/elsewhere/leaderrun-" + id}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if !fenceTerm(ctx, r) {
		t.Error("fenceTerm reported leftovers")
	}
	if running(c.Process.Pid) {
		t.Error("a leftover of a term whose cgroup is not visible here survived the fence")
	}
}

// TestTermWatchdogStarts: in this process, as run uses it, the term starts
// its watchdog once COMMAND has run for watchdogDelay, and a clean end
// makes the watchdog exit.
func TestTermWatchdogStarts(t *testing.T) {
	dir := termLockDir(t)
	tm := beginTerm(t.Context(), dir, "job", true, nil)
	if tm == nil {
		t.Fatal("no term")
	}
	ch, err := tm.Start([]string{os.Args[0], "-test.run=^$", "sleeper"}, append(os.Environ(), proctest.RoleEnv+"=helper"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	proctest.EndPID(t, ch.cmd.Process.Pid)
	var wd *watchdog
	for deadline := time.Now().Add(10 * time.Second); wd == nil && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		tm.mu.Lock()
		wd = tm.wd
		tm.mu.Unlock()
	}
	if wd == nil {
		t.Fatal("no watchdog 10s after COMMAND started")
	}
	proctest.EndPID(t, wd.pid)
	ch.cmd.Process.Kill()
	<-ch.Done()
	tm.End()
	if alive := waitGoneAll([]int{wd.pid}, 10*time.Second); len(alive) > 0 {
		t.Fatalf("the watchdog %d did not exit within 10s of the term's end", wd.pid)
	}
}

// TestWatchdogClaimGoesBeforeExit: the watchdog of a crashed term lets go
// of the name's claim once it has fenced the term and removed its marker,
// not at its exit, so that the next holder (which waits for every claim
// of the name) is granted while the watchdog still runs, and finds
// nothing left to fence. The watchdog is stopped just before its exit
// (TEST_LEADERRUN_FENCE=exiting).
func TestWatchdogClaimGoesBeforeExit(t *testing.T) {
	dir := termLockDir(t)
	w := startWrapper(t, dir, "job", "group", []string{"TEST_LEADERRUN_FENCE=exiting"})
	wd := watchdogOf(t, w.cmd.Process.Pid)
	w.crash(t)
	proctest.Eventually(t, "the watchdog stopped before its exit", func() bool { return oslock.StateOf(wd) == oslock.ProcStopped })
	if names, _ := filepath.Glob(filepath.Join(dir, "job.cmd.*")); len(names) != 0 {
		t.Errorf("the watchdog left the marker: %v", names)
	}
	l, err := elect.Open(elect.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	lead, err := l.Acquire(ctx, "job", elect.Request{})
	if err != nil {
		t.Fatalf("the next holder, with the crashed term's watchdog done but not exited: %v", err)
	}
	lead.Release()
	if left := termProcesses(t, w.id); len(left) > 0 {
		t.Errorf("processes of the crashed term left: %v", left)
	}
}

// TestPreparedWatchdogGivenUp: the watchdog started while a term is
// prepared exits when the request is given up (Close) and when its
// supervisor dies waiting, and touches nothing: the holder's term and
// marker stay.
func TestPreparedWatchdogGivenUp(t *testing.T) {
	p := Prepare("", true)
	wd := p.wd
	if wd == nil {
		t.Fatal("Prepare(true) started no watchdog")
	}
	proctest.EndPID(t, wd.pid)
	pid := wd.pid
	p.Close()
	if alive := waitGoneAll([]int{pid}, 10*time.Second); len(alive) > 0 {
		t.Fatalf("the prepared watchdog %d did not exit within 10s of Close", pid)
	}

	dir := termLockDir(t)
	holder := startWrapper(t, dir, "job", "group", nil)
	waiter := helperCmd("lr", "--dir", dir, "--name", "job", "--prepared", "--", os.Args[0], "-test.run=^$", "sleeper")
	waiter.Env = append(waiter.Env, proctest.RoleEnv+"=helper")
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		waiter.Process.Kill()
		waiter.Wait()
	})
	wpid := watchdogOf(t, waiter.Process.Pid)
	waiter.Process.Kill()
	waiter.Wait()
	if alive := waitGoneAll([]int{wpid}, 10*time.Second); len(alive) > 0 {
		t.Fatalf("the prepared watchdog %d did not exit within 10s of its waiter's SIGKILL", wpid)
	}
	for kind, pid := range holder.pids {
		if !running(pid) {
			t.Errorf("the holder's %s %d is gone after a waiter's watchdog exited", kind, pid)
		}
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "job.cmd.*")); len(names) != 1 {
		t.Errorf("markers after a waiter's watchdog exited: %v, want the holder's", names)
	}
}

// TestPreparedWatchdogKeepsClaim: a term begun with the watchdog started
// while it was prepared hands that watchdog the name's claim, which it
// keeps until the term is fenced: leaderrun SIGKILLed while its lock
// directory has been moved away and made anew, a holder in the new one is
// not granted while the watchdog is stopped before it lets the claim go
// (TEST_LEADERRUN_FENCE=halfway), and is once it goes on.
func TestPreparedWatchdogKeepsClaim(t *testing.T) {
	dir := termLockDir(t)
	w := startWrapper(t, dir, "job", "group", []string{"TEST_LEADERRUN_FENCE=halfway"}, "--prepared")
	wd := watchdogOf(t, w.cmd.Process.Pid)
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	w.crash(t)
	proctest.Eventually(t, "the watchdog stopped halfway", func() bool { return oslock.StateOf(wd) == oslock.ProcStopped })
	l, err := elect.Open(elect.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	granted := make(chan error, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	go func() {
		lead, err := l.Acquire(ctx, "job", elect.Request{})
		if err == nil {
			lead.Release()
		}
		granted <- err
	}()
	select {
	case err := <-granted:
		t.Fatalf("granted in the new directory while the dead term's watchdog keeps the claim (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	syscall.Kill(wd, syscall.SIGCONT)
	if err := <-granted; err != nil {
		t.Fatalf("not granted once the watchdog let the claim go: %v", err)
	}
	for kind, pid := range w.pids {
		if running(pid) {
			t.Errorf("%s %d of the dead term still runs", kind, pid)
		}
	}
}
