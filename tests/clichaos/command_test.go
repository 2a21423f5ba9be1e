package clichaos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/proctest"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/cmd"
)

// The roles the test binary plays for TestCLIChaos: leaderrun itself,
// when started through the link named leaderrun that TestMain makes
// (cmd.Main, as main.go runs it); COMMAND under leaderrun; and a
// grandchild that COMMAND leaves behind. The last two roles are in the
// environment, which leaderrun passes on to COMMAND; leaderrun itself
// ignores it.
const cliChaosRole = "LEADERRUN_CLICHAOS_ROLE"

// leaderrunBin is the link named leaderrun to this test binary.
var leaderrunBin string

func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "leaderrun" {
		os.Exit(cmd.Main())
	}
	switch os.Getenv(cliChaosRole) {
	case "command":
		os.Exit(chaosCommand())
	case "grandchild":
		os.Exit(chaosGrandchild())
	}
	os.Exit(runTests(m))
}

// runTests runs the tests with leaderrunBin set up, and removes it after.
func runTests(m *testing.M) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "clichaos:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "clichaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "clichaos:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	leaderrunBin = filepath.Join(dir, "leaderrun")
	if err := os.Symlink(self, leaderrunBin); err != nil {
		fmt.Fprintln(os.Stderr, "clichaos:", err)
		return 1
	}
	return m.Run()
}

// Exit codes of the roles. A violation is also written to the log, which
// is what the test checks; the code is for the wrapper's exit status.
const (
	roleFlaky     = 1 // asked to fail, for --restart on-failure
	roleError     = 2 // the test's own plumbing failed
	roleViolation = 3
)

// chaosCommand is COMMAND. It proves, as far as one process can, that it
// is the only COMMAND running: it takes flock(2) on CLICHAOS_RES/running
// with LOCK_NB and holds it for life (the kernel drops it when the process
// is gone, whatever kills it), so a COMMAND that finds it taken knows that
// another one, or a descendant that inherited it, still runs. Then, while
// it holds for CLICHAOS_HOLD ms, it appends to the fenced log every 2 ms;
// a write with an epoch below one already written is refused and
// recorded. It may leave a grandchild behind (CLICHAOS_GRANDCHILD=group or
// setsid) that inherits the running lock and keeps writing, to check that
// leaderrun ends COMMAND's leftovers before the next COMMAND starts.
func chaosCommand() int {
	epoch, err := strconv.ParseUint(os.Getenv("LEADERRUN_EPOCH"), 10, 64)
	if err != nil {
		fmt.Fprintf(os.Stderr, "clichaos command: LEADERRUN_EPOCH: %v\n", err)
		return roleError
	}
	wpid := os.Getenv("LEADERRUN_PID")
	res := os.Getenv("CLICHAOS_RES")
	log, err := openFencedLog(res)
	if err != nil {
		fmt.Fprintf(os.Stderr, "clichaos command: %v\n", err)
		return roleError
	}
	defer log.Close()
	violation := func(note string) int {
		if _, err := log.append("V", epoch, wpid, note); err != nil {
			fmt.Fprintf(os.Stderr, "clichaos command: %v (violation: %s)\n", err, note)
		}
		return roleViolation
	}
	if got, want := os.Getenv("LEADERRUN_DIR"), os.Getenv("CLICHAOS_DIR"); got != want {
		return violation(fmt.Sprintf("env: LEADERRUN_DIR=%q, want %q", got, want))
	}
	if got := os.Getenv("LEADERRUN_NAME"); got != "chaos" {
		return violation(fmt.Sprintf("env: LEADERRUN_NAME=%q, want chaos", got))
	}
	if got := strconv.Itoa(os.Getppid()); got != wpid {
		return violation(fmt.Sprintf("env: LEADERRUN_PID=%s, but the parent is %s", wpid, got))
	}

	run, err := os.OpenFile(filepath.Join(res, "running"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "clichaos command: %v\n", err)
		return roleError
	}
	if err := flock(run, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		other, _ := os.ReadFile(run.Name())
		return violation(fmt.Sprintf("running lock taken (%v): still running from an earlier start: %s; %s", err, strings.TrimSpace(string(other)), lockHolders(run)))
	}
	run.Truncate(0)
	fmt.Fprintf(run, "epoch %d wrapper %s command %d\n", epoch, wpid, os.Getpid())

	if ok, err := log.append("S", epoch, wpid, ""); err != nil || !ok {
		return fenced(err)
	}
	if how := os.Getenv("CLICHAOS_GRANDCHILD"); how != "" {
		if err := startGrandchild(run, how); err != nil {
			fmt.Fprintf(os.Stderr, "clichaos command: grandchild: %v\n", err)
			return roleError
		}
	}
	hold, _ := strconv.Atoi(os.Getenv("CLICHAOS_HOLD"))
	end := time.Now().Add(time.Duration(hold) * time.Millisecond)
	for time.Now().Before(end) {
		time.Sleep(2 * time.Millisecond)
		if ok, err := log.append("T", epoch, wpid, ""); err != nil || !ok {
			return fenced(err)
		}
	}
	if ok, err := log.append("E", epoch, wpid, ""); err != nil || !ok {
		return fenced(err)
	}
	if os.Getenv("CLICHAOS_FLAKY") != "" && rand.IntN(2) == 0 && failedBefore(res, epoch) < maxFlaky {
		return roleFlaky
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

// fenced is the exit code after a refused (or failed) write.
func fenced(err error) int {
	if err != nil {
		fmt.Fprintf(os.Stderr, "clichaos: fenced log: %v\n", err)
		return roleError
	}
	return roleViolation
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
	gc := exec.Command(self, "-test.run=^$")
	gc.Env = append(os.Environ(), cliChaosRole+"=grandchild")
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

// chaosGrandchild keeps writing with its term's epoch until it is killed
// (CLICHAOS_STUBBORN: it ignores SIGTERM, so that only SIGKILL ends it),
// holding the running lock it inherited. It gives up after a minute, so
// that a leak outlives no test by much.
func chaosGrandchild() int {
	if os.Getenv("CLICHAOS_STUBBORN") != "" {
		signal.Ignore(syscall.SIGTERM)
	}
	epoch, _ := strconv.ParseUint(os.Getenv("LEADERRUN_EPOCH"), 10, 64)
	log, err := openFencedLog(os.Getenv("CLICHAOS_RES"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "clichaos grandchild: %v\n", err)
		return roleError
	}
	defer log.Close()
	for end := time.Now().Add(time.Minute); time.Now().Before(end); {
		if ok, err := log.append("G", epoch, os.Getenv("LEADERRUN_PID"), ""); err != nil || !ok {
			return fenced(err)
		}
		time.Sleep(3 * time.Millisecond)
	}
	return 0
}

// The shared resource is a proctest.FencedLog: appends under flock(2) of
// its guard, which refuses (and logs as R) a write whose epoch is lower
// than one written before. Lines are "KIND EPOCH PID UNIXNANO WRAPPER
// [NOTE]".
func openFencedLog(dir string) (*fencedLog, error) {
	l, err := proctest.OpenFencedLog(dir)
	return &fencedLog{l}, err
}

type fencedLog struct{ *proctest.FencedLog }

// append writes one line for wrapper wpid and reports whether the epoch
// passed the fence. V (violation) lines are written whatever their epoch.
func (f *fencedLog) append(kind string, epoch uint64, wpid, note string) (bool, error) {
	fields := []string{wpid}
	if note != "" {
		fields = append(fields, note)
	}
	return f.Append(kind, epoch, fields...)
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}
