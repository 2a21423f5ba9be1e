package chaos

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/etcd/etcdcmd"
	"github.com/leaderrun/leaderrun/internal/proctest"
)

// The roles of the test binary: leaderrun-etcd, when started through the
// link of that name that TestMain makes; the term's watchdog, which cmd
// starts from /proc/self/exe with LEADERRUN_INTERNAL_ROLE set; and COMMAND,
// named by chaosRole in the environment, which leaderrun-etcd passes on
// to it and itself ignores.
const chaosRole = "LEADERRUN_ETCDCHAOS_ROLE"

// leaderrunBin is the link named leaderrun-etcd to this test binary.
var leaderrunBin string

func TestMain(m *testing.M) {
	if os.Getenv("LEADERRUN_INTERNAL_ROLE") != "" || filepath.Base(os.Args[0]) == "leaderrun-etcd" {
		os.Exit(cmd.Main(etcdcmd.Options()...))
	}
	if os.Getenv(chaosRole) == "command" {
		os.Exit(chaosCommand())
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdchaos:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "etcdchaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdchaos:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	leaderrunBin = filepath.Join(dir, "leaderrun-etcd")
	if err := os.Symlink(self, leaderrunBin); err != nil {
		fmt.Fprintln(os.Stderr, "etcdchaos:", err)
		return 1
	}
	return m.Run()
}

// Exit codes of COMMAND. A violation is also written to the log, which is
// what the test checks.
const (
	roleError     = 2 // the test's own plumbing failed
	roleViolation = 3
)

// chaosCommand is COMMAND. It proves, as far as one process can, that it
// is the only COMMAND running: it takes flock(2) on ETCDCHAOS_RES/running
// with LOCK_NB and holds it for life (the kernel drops it once the process
// is gone, whatever killed it), so a COMMAND that finds it taken knows
// that another COMMAND, of any host, is still alive. Then, for
// ETCDCHAOS_HOLD ms, it appends a tick to the fenced log every 3 ms; a
// write with an epoch below one already written is refused and recorded
// (R). With ETCDCHAOS_STUBBORN it ignores SIGTERM, so that only the
// SIGKILL after --grace ends it.
func chaosCommand() int {
	epoch, err := strconv.ParseUint(os.Getenv("LEADERRUN_EPOCH"), 10, 64)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcdchaos command: LEADERRUN_EPOCH: %v\n", err)
		return roleError
	}
	if os.Getenv("ETCDCHAOS_STUBBORN") != "" {
		signal.Ignore(syscall.SIGTERM)
	}
	wpid, host := os.Getenv("LEADERRUN_PID"), os.Getenv("ETCDCHAOS_HOST")
	res := os.Getenv("ETCDCHAOS_RES")
	log, err := proctest.OpenFencedLog(res)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcdchaos command: %v\n", err)
		return roleError
	}
	defer log.Close()
	write := func(kind, note string) (bool, error) {
		f := []string{wpid, host}
		if note != "" {
			f = append(f, note)
		}
		return log.Append(kind, epoch, f...)
	}
	violation := func(note string) int {
		if _, err := write("V", note); err != nil {
			fmt.Fprintf(os.Stderr, "etcdchaos command: %v (violation: %s)\n", err, note)
		}
		return roleViolation
	}
	if got := os.Getenv("LEADERRUN_NAME"); got != "chaos" {
		return violation(fmt.Sprintf("env: LEADERRUN_NAME=%q, want chaos", got))
	}
	if got := strconv.Itoa(os.Getppid()); got != wpid {
		return violation(fmt.Sprintf("env: LEADERRUN_PID=%s, but the parent is %s", wpid, got))
	}
	run, err := os.OpenFile(filepath.Join(res, "running"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcdchaos command: %v\n", err)
		return roleError
	}
	if err := flock(run, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		other, _ := os.ReadFile(run.Name())
		return violation(fmt.Sprintf("running-lock-taken(%v):another-COMMAND-is-alive:%s", err, strings.ReplaceAll(strings.TrimSpace(string(other)), " ", "_")))
	}
	run.Truncate(0)
	fmt.Fprintf(run, "epoch %d wrapper %s host %s command %d\n", epoch, wpid, host, os.Getpid())
	if ok, err := write("S", ""); err != nil || !ok {
		return fenced(err)
	}
	hold, _ := strconv.Atoi(os.Getenv("ETCDCHAOS_HOLD"))
	for end := time.Now().Add(time.Duration(hold) * time.Millisecond); time.Now().Before(end); {
		time.Sleep(3 * time.Millisecond)
		if ok, err := write("T", ""); err != nil || !ok {
			return fenced(err)
		}
	}
	if ok, err := write("E", ""); err != nil || !ok {
		return fenced(err)
	}
	return 0
}

// fenced is the exit code after a refused (or failed) write.
func fenced(err error) int {
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcdchaos: fenced log: %v\n", err)
		return roleError
	}
	return roleViolation
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}
