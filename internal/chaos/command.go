//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package chaos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

// Exit codes of the roles. A violation is also written to the log, which
// is what the checks read; the code is for the wrapper's exit status.
const (
	ExitFlaky     = 1 // asked to fail, for --restart on-failure
	ExitError     = 2 // the test's own plumbing failed
	ExitViolation = 3
)

// Spec is what one COMMAND does, passed to it in its environment
// ([Spec.Env]).
type Spec struct {
	// Res is the run's directory of the shared resource: the fenced log
	// and the running lock. Every process of the run carries it in its
	// environment ([Marker]).
	Res string
	// Dir, if set, is the lock directory COMMAND expects in LEADERRUN_DIR.
	Dir string
	// Host is written in every line of the log ("-" if empty).
	Host string
	// Hold is how long COMMAND ticks; Tick is the time between ticks.
	Hold, Tick time.Duration
	// Stubborn: COMMAND ignores SIGTERM, so that only SIGKILL ends it.
	Stubborn bool
	// Grandchild, "group" or "setsid", leaves a grandchild behind, in
	// COMMAND's process group or in a session of its own, which inherits
	// the running lock and ticks until it is killed (or for a minute);
	// with StubbornGrandchild it ignores SIGTERM.
	Grandchild         string
	StubbornGrandchild bool
	// Flaky: COMMAND fails (ExitFlaky) after its run one time in two, at
	// most maxFlaky times a term, for --restart on-failure.
	Flaky bool
}

const (
	envRes        = "CHAOS_RES"
	envDir        = "CHAOS_DIR"
	envHost       = "CHAOS_HOST"
	envHold       = "CHAOS_HOLD"
	envTick       = "CHAOS_TICK"
	envStubborn   = "CHAOS_STUBBORN"
	envGrandchild = "CHAOS_GRANDCHILD"
	envGCStubborn = "CHAOS_GRANDCHILD_STUBBORN"
	envFlaky      = "CHAOS_FLAKY"
)

// Marker is the variable, "CHAOS_RES=res", that every process of a run
// over res carries: for [proctest.WithEnv].
func Marker(res string) string { return envRes + "=" + res }

// Env is the environment of a wrapper whose COMMAND (the test binary,
// started with -test.run=^$) plays s: this process's environment without
// its LEADERRUN_ and CHAOS_ variables, then the role and s.
func (s Spec) Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEADERRUN_") && !strings.HasPrefix(kv, "CHAOS_") {
			env = append(env, kv)
		}
	}
	env = append(env, proctest.RoleEnv+"="+RoleCommand, Marker(s.Res))
	if s.Dir != "" {
		env = append(env, envDir+"="+s.Dir)
	}
	return append(env, s.what()...)
}

// String says what COMMAND does, for the suites' event logs.
func (s Spec) String() string {
	w := s.what()
	for i := range w {
		w[i] = strings.TrimPrefix(w[i], "CHAOS_")
	}
	return strings.Join(w, " ")
}

func (s Spec) what() []string {
	var w []string
	if s.Host != "" {
		w = append(w, envHost+"="+s.Host)
	}
	w = append(w, fmt.Sprintf("%s=%d", envHold, s.Hold.Milliseconds()))
	if s.Tick != 0 {
		w = append(w, fmt.Sprintf("%s=%d", envTick, s.Tick.Milliseconds()))
	}
	flag := func(on bool, name string) {
		if on {
			w = append(w, name+"=1")
		}
	}
	if s.Grandchild != "" {
		w = append(w, envGrandchild+"="+s.Grandchild)
	}
	flag(s.StubbornGrandchild, envGCStubborn)
	flag(s.Stubborn, envStubborn)
	flag(s.Flaky, envFlaky)
	return w
}

// writer appends this process's lines to the fenced log.
type writer struct {
	log        *proctest.FencedLog
	epoch      uint64
	wpid, host string
	role       string
}

func openWriter(role string) (*writer, error) {
	epoch, err := strconv.ParseUint(os.Getenv("LEADERRUN_EPOCH"), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("LEADERRUN_EPOCH: %v", err)
	}
	log, err := proctest.OpenFencedLog(os.Getenv(envRes))
	if err != nil {
		return nil, err
	}
	host := os.Getenv(envHost)
	if host == "" {
		host = "-"
	}
	return &writer{log: log, epoch: epoch, wpid: os.Getenv("LEADERRUN_PID"), host: host, role: role}, nil
}

// write appends "KIND EPOCH PID UNIXNANO WRAPPER HOST [NOTE]" and reports
// whether the epoch passed the fence. V lines are written whatever their
// epoch.
func (w *writer) write(kind, note string) (bool, error) {
	f := []string{w.wpid, w.host}
	if note != "" {
		f = append(f, note)
	}
	return w.log.Append(kind, w.epoch, f...)
}

func (w *writer) violation(note string) int {
	if _, err := w.write("V", note); err != nil {
		fmt.Fprintf(os.Stderr, "chaos %s: %v (violation: %s)\n", w.role, err, note)
	}
	return ExitViolation
}

// tick writes kind, and reports the exit code if it was refused or failed.
func (w *writer) tick(kind string) (int, bool) {
	ok, err := w.write(kind, "")
	switch {
	case err != nil:
		fmt.Fprintf(os.Stderr, "chaos %s: fenced log: %v\n", w.role, err)
		return ExitError, false
	case !ok:
		return ExitViolation, false
	}
	return 0, true
}

func plumbing(role string, err error) int {
	fmt.Fprintf(os.Stderr, "chaos %s: %v\n", role, err)
	return ExitError
}

// command is COMMAND. It proves, as far as one process can, that it is
// the only COMMAND running: it takes flock(2) on RES/running with LOCK_NB
// and holds it for life (the kernel drops it once the process is gone,
// whatever kills it), so a COMMAND that finds it taken knows that another
// one, of any host and term, or a descendant that inherited it, still
// runs. It checks the variables leaderrun gives it. Then, for Hold, it
// appends a tick to the fenced log every Tick (default 2ms); a write with
// an epoch below one already written is refused and recorded (R).
func command() int {
	if os.Getenv(envStubborn) != "" {
		signal.Ignore(syscall.SIGTERM)
	}
	w, err := openWriter("command")
	if err != nil {
		return plumbing("command", err)
	}
	defer w.log.Close()
	if want := os.Getenv(envDir); want != "" {
		if got := os.Getenv("LEADERRUN_DIR"); got != want {
			return w.violation(fmt.Sprintf("env: LEADERRUN_DIR=%q, want %q", got, want))
		}
	}
	if got := os.Getenv("LEADERRUN_NAME"); got != "chaos" {
		return w.violation(fmt.Sprintf("env: LEADERRUN_NAME=%q, want chaos", got))
	}
	if got := strconv.Itoa(os.Getppid()); got != w.wpid {
		return w.violation(fmt.Sprintf("env: LEADERRUN_PID=%s, but the parent is %s", w.wpid, got))
	}
	res := os.Getenv(envRes)
	run, err := os.OpenFile(filepath.Join(res, "running"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return plumbing("command", err)
	}
	if err := flock(run, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		other, _ := os.ReadFile(run.Name())
		return w.violation(fmt.Sprintf("running lock taken (%v): still running from an earlier start: %s; %s", err, strings.TrimSpace(string(other)), lockHolders(run)))
	}
	run.Truncate(0)
	fmt.Fprintf(run, "epoch %d wrapper %s host %s command %d\n", w.epoch, w.wpid, w.host, os.Getpid())
	if code, ok := w.tick("S"); !ok {
		return code
	}
	if how := os.Getenv(envGrandchild); how != "" {
		if err := startGrandchild(run, how); err != nil {
			return plumbing("command", fmt.Errorf("grandchild: %v", err))
		}
	}
	hold, _ := strconv.Atoi(os.Getenv(envHold))
	tick := 2 * time.Millisecond
	if ms, _ := strconv.Atoi(os.Getenv(envTick)); ms > 0 {
		tick = time.Duration(ms) * time.Millisecond
	}
	for end := time.Now().Add(time.Duration(hold) * time.Millisecond); time.Now().Before(end); {
		time.Sleep(tick)
		if code, ok := w.tick("T"); !ok {
			return code
		}
	}
	if code, ok := w.tick("E"); !ok {
		return code
	}
	if os.Getenv(envFlaky) != "" && rand.IntN(2) == 0 && failedBefore(res, w.epoch) < maxFlaky {
		return ExitFlaky
	}
	return 0
}

// maxFlaky bounds how often a flaky COMMAND fails in one term. Unbounded,
// a run of failures grows --restart's back-off (100ms doubling) to tens of
// seconds about once in a few hundred terms, and the drain phase, where no
// fault ends such a term, took that for stuck wrappers.
const maxFlaky = 3

// failedBefore counts, and records, the failures of this term's COMMAND.
func failedBefore(res string, epoch uint64) int {
	f, err := os.OpenFile(filepath.Join(res, fmt.Sprintf("flaky-%d", epoch)), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return maxFlaky
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return maxFlaky
	}
	f.WriteString("x")
	return int(st.Size())
}

// lockHolders describes the processes that /proc/locks names as holding
// a lock on f, as the kernel sees them.
func lockHolders(f *os.File) string {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err.Error()
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return err.Error()
	}
	ino := fmt.Sprintf(":%d ", st.Ino)
	var out []string
	for _, l := range strings.Split(string(locks), "\n") {
		f := strings.Fields(l)
		if !strings.Contains(l, ino) || len(f) < 5 {
			continue
		}
		pid := f[4]
		desc := "holder pid " + pid
		if status, err := os.ReadFile("/proc/" + pid + "/status"); err != nil {
			desc += " gone"
		} else {
			for _, kv := range strings.Split(string(status), "\n") {
				if strings.HasPrefix(kv, "State:") || strings.HasPrefix(kv, "Threads:") {
					desc += ", " + strings.Join(strings.Fields(kv), " ")
				}
			}
			env, _ := os.ReadFile("/proc/" + pid + "/environ")
			desc += fmt.Sprintf(", environ %d bytes", len(env))
		}
		out = append(out, desc)
	}
	return "holders: [" + strings.Join(out, "; ") + "]"
}

// startGrandchild starts this binary as a grandchild that inherits the
// running lock as descriptor 3, in COMMAND's process group or, for
// setsid, in a session of its own (out of the group leaderrun signals).
// COMMAND does not wait for it: it is left behind.
func startGrandchild(run *os.File, how string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	gc := proctest.Command(RoleGrandchild)
	gc.Path, gc.Args[0] = self, self
	gc.ExtraFiles = []*os.File{run}
	gc.Stdout, gc.Stderr = os.Stdout, os.Stderr
	if how == "setsid" {
		gc.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := gc.Start(); err != nil {
		return err
	}
	return gc.Process.Release()
}

// grandchild keeps writing G lines with its term's epoch, holding the
// running lock it inherited, until it is killed. It gives up after a
// minute, so that a leak outlives no test by much.
func grandchild() int {
	if os.Getenv(envGCStubborn) != "" {
		signal.Ignore(syscall.SIGTERM)
	}
	w, err := openWriter("grandchild")
	if err != nil {
		return plumbing("grandchild", err)
	}
	defer w.log.Close()
	for end := time.Now().Add(time.Minute); time.Now().Before(end); {
		if code, ok := w.tick("G"); !ok {
			return code
		}
		time.Sleep(3 * time.Millisecond)
	}
	return 0
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}
