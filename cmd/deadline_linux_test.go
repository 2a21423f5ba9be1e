package cmd

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/proctest"
	"github.com/leaderrun/leaderrun/oslock"
)

// The deadline tests run leaderrun over renewingBackend: the flock lock,
// with terms that end unless renewed every lease/3, as etcd's do, and a
// TermEnder that records, in the file its token names, that the watchdog
// ended the term. Roles, with proctest.RoleEnv=helper:
//
//	lrlease ARGS...   leaderrun over renewingBackend
//	termrecorder      COMMAND: writes "ready" to T_PIDS, then "term" at
//	                  SIGTERM, which it otherwise ignores, for a minute
//
// The watchdog, started by leaderrun as this binary with only its own
// environment, runs the late role here too.
const testLease = time.Second

func init() {
	if code, ok := New(renewingOptions()...).runLateRole(); ok {
		os.Exit(code)
	}
	if os.Getenv(proctest.RoleEnv) != "helper" || len(os.Args) < 3 {
		return
	}
	switch os.Args[2] {
	case "lrlease":
		if i := slices.Index(os.Args, "--dir"); i > 0 && i+1 < len(os.Args) {
			leaseDir = os.Args[i+1]
		}
		os.Exit(ExitCode(New(renewingOptions()...).Run(context.Background(), append([]string{"leaderrun"}, os.Args[3:]...))))
	case "termrecorder":
		terms := make(chan os.Signal, 1)
		signal.Notify(terms, syscall.SIGTERM)
		report := func(s string) {
			f, _ := os.OpenFile(os.Getenv("T_PIDS"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
			f.WriteString(s + "\n")
			f.Close()
		}
		report("command " + strconv.Itoa(os.Getpid()))
		report("ready")
		select {
		case <-terms:
			report("term")
		case <-time.After(time.Minute):
		}
		time.Sleep(time.Minute)
		os.Exit(0)
	}
}

// leaseDir is the --dir of an lrlease line: renewingBackend's locks are
// there, as they are for the flock backend.
var leaseDir string

func renewingOptions() []Option {
	return []Option{
		WithBackend(func(FlagValue) (Backend, error) {
			lk, err := elect.Open(elect.Config{Dir: leaseDir})
			if err != nil {
				return nil, err
			}
			return renewingBackend{lk}, nil
		}),
		WithTermEnder(func(_ context.Context, token string) error {
			return os.WriteFile(token, []byte("ended\n"), 0o600)
		}),
		WithTermEndPreparer(recordingPreparer{}),
	}
}

// recordingPreparer readies the end of a term by writing "prepared" to
// the file its token names; the end it returns writes "ended prepared"
// there, if the preparation was made.
type recordingPreparer struct{}

func (recordingPreparer) PrepareTermEnd(token string) (func(context.Context) error, func()) {
	err := os.WriteFile(token, []byte("prepared\n"), 0o600)
	return func(context.Context) error {
		if err != nil {
			return err
		}
		return os.WriteFile(token, []byte("ended prepared\n"), 0o600)
	}, func() {}
}

// renewingBackend is elect's Locker whose terms, like etcd's, end unless
// renewed: a goroutine of the holder moves the deadline on every
// testLease/3, and ends the term with ErrSessionLost if it finds the
// deadline passed (the process was stopped).
type renewingBackend struct{ *elect.Locker }

// loseFirst, with T_LOSE_FIRST set, makes the process's first term end
// with ErrSessionLost as it is granted, as etcd's can in a quorum loss.
var loseFirst sync.Once

func (b renewingBackend) Acquire(ctx context.Context, name string, r elect.Request) (*elect.Leadership, error) {
	inner, err := b.Locker.Acquire(ctx, name, r)
	if err != nil {
		return nil, err
	}
	if os.Getenv("T_LOSE_FIRST") != "" {
		lost := false
		loseFirst.Do(func() { lost = true })
		if lost {
			lead, end := elect.NewLeadership(elect.Term{Name: name, Dir: inner.Dir(), Mode: inner.Mode(), Epoch: inner.Epoch(), Since: inner.Since(), Release: inner.Release,
				Deadline: func() (time.Time, <-chan struct{}) { return time.Now(), nil }})
			end(elect.ErrSessionLost)
			return lead, nil
		}
	}
	var mu sync.Mutex
	dl, moved := time.Now().Add(testLease), make(chan struct{})
	lead, end := elect.NewLeadership(elect.Term{
		Name: name, Dir: inner.Dir(), Mode: inner.Mode(), Epoch: inner.Epoch(), Since: inner.Since(), Release: inner.Release,
		Deadline: func() (time.Time, <-chan struct{}) {
			mu.Lock()
			defer mu.Unlock()
			return dl, moved
		},
	})
	go func() {
		tick := time.NewTicker(testLease / 3)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				mu.Lock()
				if time.Now().After(dl) {
					mu.Unlock()
					end(elect.ErrSessionLost)
					return
				}
				dl = time.Now().Add(testLease)
				close(moved)
				moved = make(chan struct{})
				mu.Unlock()
			case <-inner.Done():
				end(inner.Err())
				return
			case <-lead.Done():
				return
			}
		}
	}()
	return lead, nil
}

// TermToken names the file the test's TermEnder writes.
func (renewingBackend) TermToken(*elect.Leadership) (string, error) {
	return os.Getenv("T_ENDED"), nil
}

type leaseRun struct {
	cmd              *os.Process
	pids, ended, dir string
	command          int
}

// startLeaseRun starts leaderrun over renewingBackend with a termrecorder
// COMMAND and waits until COMMAND runs.
func startLeaseRun(t *testing.T) *leaseRun {
	t.Helper()
	tmp := t.TempDir()
	r := &leaseRun{pids: filepath.Join(tmp, "pids"), ended: filepath.Join(tmp, "ended"), dir: termLockDir(t)}
	c := helperCmd("lrlease", "--dir", r.dir, "--name", "job", "--grace", "300ms", "--", os.Args[0], "-test.run=^$", "termrecorder")
	c.Env = append(c.Env, proctest.RoleEnv+"=helper", "T_PIDS="+r.pids, "T_ENDED="+r.ended)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	r.cmd = c.Process
	t.Cleanup(func() {
		c.Process.Signal(syscall.SIGCONT)
		c.Process.Kill()
		c.Wait()
	})
	r.waitFor(t, "ready", 20*time.Second)
	for _, line := range strings.Split(r.read(), "\n") {
		if v, ok := strings.CutPrefix(line, "command "); ok {
			r.command, _ = strconv.Atoi(v)
		}
	}
	if r.command < 2 {
		t.Fatalf("no COMMAND pid in %q", r.read())
	}
	proctest.EndPID(t, r.command)
	// COMMAND can say ready before leaderrun has recorded it (its marker's
	// command line, then the watchdog told): a leaderrun stopped in
	// between leaves the watchdog nobody to send SIGTERM to.
	for end := time.Now().Add(10 * time.Second); !r.recorded(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("leaderrun did not record COMMAND in its term's marker within 10s")
		}
	}
	return r
}

// recorded reports whether the term's marker names COMMAND.
func (r *leaseRun) recorded() bool {
	markers, _ := filepath.Glob(filepath.Join(r.dir, "job.cmd.*"))
	for _, m := range markers {
		if b, _ := os.ReadFile(m); strings.Contains(string(b), "\ncommand "+strconv.Itoa(r.command)+" ") {
			return true
		}
	}
	return false
}

func (r *leaseRun) read() string {
	b, _ := os.ReadFile(r.pids)
	return string(b)
}

func (r *leaseRun) waitFor(t *testing.T, line string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); !strings.Contains(r.read(), line+"\n"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("COMMAND did not say %q within %v (it said %q)", line, d, r.read())
		}
	}
}

func (r *leaseRun) waitEnded(t *testing.T, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); ; time.Sleep(5 * time.Millisecond) {
		if b, _ := os.ReadFile(r.ended); string(b) == "ended prepared\n" {
			return
		} else if len(b) > 0 && string(b) != "prepared\n" {
			t.Fatalf("the watchdog ended the term as %q, not by the end its TermEndPreparer readied", b)
		}
		if time.Now().After(end) {
			t.Fatalf("the watchdog did not end the term within %v", d)
		}
	}
}

// TestWatchdogStoppedWrapper: leaderrun is stopped (SIGSTOP) while COMMAND
// runs, so its term's deadline passes unrenewed. The watchdog sends
// COMMAND SIGTERM, SIGKILL after --grace (COMMAND ignores SIGTERM), and
// only then ends the term in the backend. Continued, leaderrun exits 80.
func TestWatchdogStoppedWrapper(t *testing.T) {
	r := startLeaseRun(t)
	if err := r.cmd.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "term", 10*time.Second)
	if b, _ := os.ReadFile(r.ended); string(b) != "prepared\n" {
		t.Fatalf("before COMMAND had its grace, the term's end file says %q, want the preparation alone", b)
	}
	r.waitEnded(t, 10*time.Second)
	if running(r.command) {
		t.Fatalf("COMMAND %d still runs after the watchdog ended its term", r.command)
	}
	r.cmd.Signal(syscall.SIGCONT)
	st, err := r.cmd.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if st.ExitCode() != ExitLockLost {
		t.Fatalf("continued leaderrun exited %d, want %d", st.ExitCode(), ExitLockLost)
	}
}

// TestWatchdogKilledWrapper: leaderrun is SIGKILLed; its watchdog kills
// COMMAND and ends the term at once, not at the deadline.
func TestWatchdogKilledWrapper(t *testing.T) {
	r := startLeaseRun(t)
	killed := time.Now()
	r.cmd.Kill()
	r.cmd.Wait()
	r.waitEnded(t, 10*time.Second)
	if running(r.command) {
		t.Fatalf("COMMAND %d still runs after the watchdog ended its term", r.command)
	}
	if strings.Contains(r.read(), "term\n") {
		t.Fatal("COMMAND got SIGTERM: the watchdog waited for the deadline instead of fencing at once")
	}
	t.Logf("term ended %v after the SIGKILL", time.Since(killed).Round(time.Millisecond))
}

// TestWatchdogRenewed: a leaderrun that runs renews its term; the
// watchdog leaves COMMAND alone past several leases, and a clean end
// does not end the term through the backend.
// A term lost as it is granted, before COMMAND starts (etcd: a quorum
// lost), is no reason to leave the name to nobody: leaderrun queues again
// and runs COMMAND in its next term, once.
func TestTermLostBeforeCommand(t *testing.T) {
	tmp := t.TempDir()
	ran := filepath.Join(tmp, "ran")
	c := helperCmd("lrlease", "--dir", termLockDir(t), "--name", "lost", "--grace", "300ms", "--", "sh", "-c", "echo ran >> "+ran)
	c.Env = append(c.Env, proctest.RoleEnv+"=helper", "T_LOSE_FIRST=1", "T_ENDED="+filepath.Join(tmp, "ended"))
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("leaderrun: %v: %s", err, out)
	}
	if b, _ := os.ReadFile(ran); string(b) != "ran\n" {
		t.Errorf("COMMAND ran %q times; want once", b)
	}
}

func TestWatchdogRenewed(t *testing.T) {
	r := startLeaseRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*testLease)
	defer cancel()
	if err := oslock.WaitGone(ctx, r.command); err == nil {
		t.Fatalf("COMMAND ended while its term was renewed: %q", r.read())
	}
	if strings.Contains(r.read(), "term\n") {
		t.Fatal("COMMAND got SIGTERM while its term was renewed")
	}
	r.cmd.Signal(syscall.SIGTERM)
	r.cmd.Wait()
	if b, _ := os.ReadFile(r.ended); string(b) != "prepared\n" {
		t.Fatalf("after a clean end the term's end file says %q, want the watchdog's preparation alone", b)
	}
}
