package instance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/instance"
	"github.com/leaderrun/leaderrun/internal/proctest"
	"github.com/leaderrun/leaderrun/oslock"
)

func lockDir(t *testing.T) string {
	d := t.TempDir()
	os.Chmod(d, 0o700)
	return d
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestFidelity(t *testing.T) {
	dir := lockDir(t)
	p := startApp(t, dir, "app")
	p.expect(t, "primary ")
	args := [][]byte{
		[]byte(""), []byte("two words"), []byte("line\nbreak"), []byte("-"), []byte("--x"), []byte("value"),
		[]byte("--"), {0xff, 0xfe, 'a', 0}, []byte("tab\there"), []byte("ünïcode"), []byte(""),
	}
	work := t.TempDir()
	t.Chdir(work)
	t.Setenv("INST_SECRET", "s3cret")
	t.Setenv("INST_SHARED", "v=1\nline2\xff")
	for _, withEnv := range []bool{false, true} {
		o := instance.Options{Args: append([][]byte{[]byte("echo")}, args...)}
		if withEnv {
			o.Env = []string{"INST_SHARED"}
		}
		res, out, err := forward(t, testCtx(t), dir, "app", o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Primary || res.Exit != 0 || res.PID != p.pid() {
			t.Fatalf("result %+v, want forwarded to pid %d with exit 0", res, p.pid())
		}
		var e echo
		if err := json.Unmarshal([]byte(out), &e); err != nil {
			t.Fatalf("primary's answer %q: %v", out, err)
		}
		if len(e.Args) != len(o.Args) {
			t.Fatalf("got %d args, sent %d: %q", len(e.Args), len(o.Args), e.Args)
		}
		for i := range o.Args {
			if !bytes.Equal(e.Args[i], o.Args[i]) {
				t.Errorf("arg %d: got %q, sent %q", i, e.Args[i], o.Args[i])
			}
		}
		if e.Cwd != work {
			t.Errorf("cwd %q, want the caller's %q", e.Cwd, work)
		}
		if e.PID != os.Getpid() || e.UID != os.Geteuid() {
			t.Errorf("peer pid %d uid %d, want %d %d", e.PID, e.UID, os.Getpid(), os.Geteuid())
		}
		wantEnv := [][]byte(nil)
		if withEnv {
			wantEnv = [][]byte{[]byte("INST_SHARED=v=1\nline2\xff")}
		}
		if fmt.Sprintf("%q", e.Env) != fmt.Sprintf("%q", wantEnv) {
			t.Errorf("env %q, want %q", e.Env, wantEnv)
		}
	}
}

func TestExitCodesAndLargeOutput(t *testing.T) {
	dir := lockDir(t)
	p := startApp(t, dir, "app")
	p.expect(t, "primary ")
	for _, code := range []int{0, 1, 3, 130, 255} {
		res, _, err := forward(t, testCtx(t), dir, "app", instance.Options{Args: [][]byte{[]byte("exit"), fmt.Appendf(nil, "%d", code)}})
		if err != nil || res.Exit != code {
			t.Errorf("exit %d: got %+v, %v", code, res, err)
		}
	}
	const n = 3 << 20 / 100 * 100 // three times the bus's message limit
	res, out, err := forward(t, testCtx(t), dir, "app", instance.Options{Args: [][]byte{[]byte("big"), fmt.Appendf(nil, "%d", n)}})
	if err != nil || res.Exit != 0 {
		t.Fatalf("big: %+v, %v", res, err)
	}
	// The two streams are written in order each, not with each other.
	if len(out) != n+len("big done\n") || strings.Count(out, "big done\n") != 1 {
		t.Errorf("big: got %d bytes, want %d", len(out), n+9)
	}
}

// TestStdin: the caller's stdin reaches the primary's application, byte
// for byte, as it reads it.
func TestStdin(t *testing.T) {
	dir := lockDir(t)
	p := startApp(t, dir, "app")
	p.expect(t, "primary ")
	in := bytes.Repeat([]byte("line\x00\xff\n"), 50000) // 400 kB, several pieces
	var out, errOut bytes.Buffer
	res, err := instance.Run(testCtx(t), "app", instance.Options{Dir: dir, Args: [][]byte{[]byte("cat")}, Stdin: bytes.NewReader(in), Stdout: &out, Stderr: &errOut},
		func(context.Context, *instance.Primary) error { t.Error("became the primary"); return nil })
	if err != nil || res.Exit != 0 {
		t.Fatalf("%+v, %v", res, err)
	}
	if !bytes.Equal(out.Bytes(), in) || errOut.String() != fmt.Sprintf("%d <nil>\n", len(in)) {
		t.Fatalf("got %d bytes back (equal %v), stderr %q", out.Len(), bytes.Equal(out.Bytes(), in), errOut.String())
	}
}

// TestRetryRunsOnce: a launch retried with the same ID is answered without
// being delivered again.
func TestRetryRunsOnce(t *testing.T) {
	dir := lockDir(t)
	p := startApp(t, dir, "app")
	p.expect(t, "primary ")
	p.expect(t, "inv ") // its own
	id := instance.NewID()
	for range 3 {
		res, _, err := forward(t, testCtx(t), dir, "app", instance.Options{ID: id, Args: [][]byte{[]byte("exit"), []byte("7")}})
		if err != nil || res.Exit != 7 {
			t.Fatalf("retry: %+v, %v", res, err)
		}
	}
	// One more, different, invocation marks the end of the deliveries.
	if _, _, err := forward(t, testCtx(t), dir, "app", instance.Options{ID: "last"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for l := p.expect(t, "inv "); l != "inv last"; l = p.expect(t, "inv ") {
		got = append(got, l)
	}
	if len(got) != 1 || got[0] != "inv "+id {
		t.Errorf("deliveries before the last: %q, want one of %s", got, id)
	}
}

// TestSimultaneous starts many launches at the same instant, again and
// again: exactly one is the primary, every other one is answered, and no
// invocation is delivered twice.
func TestSimultaneous(t *testing.T) {
	n, rounds := 100, 3
	if os.Getenv("INST_PAIRS") != "" {
		rounds = 0
	}
	if testing.Short() {
		n, rounds = 20, 2
	}
	for round := range rounds {
		simultaneous(t, round, n)
	}
	for round := range 20 + 200*len(os.Getenv("INST_PAIRS")) {
		simultaneous(t, 100+round, 2) // two within the same millisecond
	}
}

func simultaneous(t *testing.T, round, n int) {
	dir := lockDir(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	type launch struct {
		cmd *exec.Cmd
		out bytes.Buffer
		err error
	}
	ls := make([]*launch, n)
	for i := range ls {
		l := &launch{}
		l.cmd = exec.Command(os.Args[0], "-test.run=^$")
		l.cmd.Env = append(os.Environ(), roleEnv+"=app", "INST_DIR="+dir, "INST_NAME=race", "INST_BARRIER=1",
			fmt.Sprintf("INST_MAX=%d", n-1), "INST_ACK=60s")
		l.cmd.ExtraFiles = []*os.File{r}
		l.cmd.Stdout = &l.out
		l.cmd.Stderr = &l.out
		if err := l.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ls[i] = l
	}
	r.Close()
	t.Cleanup(func() {
		for _, l := range ls {
			if l.cmd.ProcessState == nil && l.cmd.Process.Pid > 1 {
				l.cmd.Process.Kill()
			}
		}
	})
	w.Close() // go
	waited := make(chan struct{})
	go func() {
		for _, l := range ls {
			l.err = l.cmd.Wait()
		}
		close(waited)
	}()
	select {
	case <-waited:
	case <-time.After(120 * time.Second):
		for _, l := range ls {
			if l.cmd.Process.Pid > 1 {
				l.cmd.Process.Kill()
			}
		}
		<-waited
		t.Fatalf("round %d: launches did not all end within 120s", round)
	}
	primaries := 0
	var prim *launch
	for _, l := range ls {
		if strings.HasPrefix(l.out.String(), "primary ") {
			primaries++
			prim = l
			continue
		}
		var e echo
		if l.err != nil || json.Unmarshal(l.out.Bytes(), &e) != nil || e.PID != l.cmd.Process.Pid {
			t.Errorf("round %d: launch pid %d: %v, output %q", round, l.cmd.Process.Pid, l.err, l.out.String())
		}
	}
	if primaries != 1 {
		for _, l := range ls {
			if strings.HasPrefix(l.out.String(), "primary ") {
				t.Logf("primary pid %d: %v\n%s", l.cmd.Process.Pid, l.err, l.out.String())
			}
		}
		t.Fatalf("round %d: %d primaries among %d launches, want 1", round, primaries, n)
	}
	seen := map[string]int{}
	for _, line := range strings.Split(prim.out.String(), "\n") {
		if id, ok := strings.CutPrefix(line, "inv "); ok {
			seen[id]++
		}
	}
	if len(seen) != n {
		t.Errorf("round %d: primary took %d distinct invocations, want %d (its own and %d forwarded)", round, len(seen), n, n-1)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("round %d: invocation %s delivered %d times", round, id, c)
		}
	}
}

// TestPrimaryKilledBeforeAccept: the primary dies while the invocation
// waits to be taken; the caller takes over and handles it itself.
func TestPrimaryKilledBeforeAccept(t *testing.T) {
	dir := lockDir(t)
	p := startApp(t, dir, "app", "INST_NOREAD=1")
	p.expect(t, "primary ")
	type outcome struct {
		res  instance.Result
		own  *instance.Invocation
		err  error
		took time.Duration
	}
	done := make(chan outcome, 1)
	go func() {
		var own *instance.Invocation
		start := time.Now()
		res, err := instance.Run(testCtx(t), "app", instance.Options{Dir: dir, AckTimeout: 30 * time.Second, Args: [][]byte{[]byte("mine")}},
			func(ctx context.Context, pr *instance.Primary) error {
				own = <-pr.Invocations()
				own.Done(5)
				return nil
			})
		done <- outcome{res, own, err, time.Since(start)}
	}()
	p.expect(t, "member") // connected: its invocation waits to be taken
	p.signal(t, syscall.SIGKILL)
	o := <-done
	if o.err != nil || !o.res.Primary || o.res.Exit != 5 {
		t.Fatalf("got %+v, %v; want this launch to take over as primary, exit 5", o.res, o.err)
	}
	if !o.own.Local || string(o.own.Args[0]) != "mine" {
		t.Errorf("own invocation %+v", o.own)
	}
}

// TestPrimaryKilledAfterAccept: a primary that took the invocation and
// died gives ErrAcceptedLost, and the caller does not run it.
func TestPrimaryKilledAfterAccept(t *testing.T) {
	dir := lockDir(t)
	p := startApp(t, dir, "app")
	p.expect(t, "primary ")
	p.expect(t, "inv ")
	done := make(chan error, 1)
	accepted := make(chan struct{})
	go func() {
		_, _, err := forward(t, testCtx(t), dir, "app", instance.Options{Args: [][]byte{[]byte("hold")},
			OnForward: func(int) { close(accepted) }})
		done <- err
	}()
	<-accepted // the caller knows it was accepted (see doc.go on the instant before)
	p.signal(t, syscall.SIGKILL)
	err := <-done
	if !errors.Is(err, instance.ErrAcceptedLost) {
		t.Fatalf("got %v, want ErrAcceptedLost", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprint(p.pid())) {
		t.Errorf("%v does not name the primary's pid %d", err, p.pid())
	}
}

// TestPrimaryStopped: a stopped primary is reported within AckTimeout,
// by pid and state; Replace takes over.
func TestPrimaryStopped(t *testing.T) {
	dir := lockDir(t)
	p := startApp(t, dir, "app")
	p.expect(t, "primary ")
	p.signal(t, syscall.SIGSTOP)
	t.Cleanup(func() { p.signal(t, syscall.SIGCONT) })
	// kill(2) returns before the primary has stopped: it may still answer
	// what comes in meanwhile.
	proctest.Eventually(t, "the primary stopped", func() bool { return oslock.StateOf(p.pid()) == oslock.ProcStopped })
	ack := 500 * time.Millisecond
	res, out, err := forward(t, testCtx(t), dir, "app", instance.Options{AckTimeout: ack})
	var nr *instance.NotRespondingError
	if !errors.As(err, &nr) || !errors.Is(err, instance.ErrNotResponding) {
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid()))
		t.Fatalf("got %+v %q, %v, want a NotRespondingError; primary %s", res, out, err, st)
	}
	if nr.PID != p.pid() || nr.State != "stopped" {
		t.Errorf("%v: want pid %d, state stopped", err, p.pid())
	}
	t.Log(err)
	res, err = instance.Run(testCtx(t), "app", instance.Options{Dir: dir, AckTimeout: ack, Replace: true, KillAfter: 100 * time.Millisecond},
		func(ctx context.Context, pr *instance.Primary) error {
			(<-pr.Invocations()).Done(4)
			return nil
		})
	if err != nil || !res.Primary || res.Exit != 4 {
		t.Fatalf("replace: %+v, %v", res, err)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Errorf("replaced primary pid %d still runs", p.pid())
	}
}

func TestBadName(t *testing.T) {
	dir := lockDir(t)
	_, _, err := forward(t, testCtx(t), dir, "bad name", instance.Options{})
	if !errors.Is(err, elect.ErrInvalidName) {
		t.Fatalf("a bad name: %v", err)
	}
}

// TestNotInstance: the name is held by a plain leader whose bus takes no
// requests: the launch says so rather than wait or take over.
func TestNotInstance(t *testing.T) {
	dir := lockDir(t)
	ctx := testCtx(t)
	lk, err := elect.Open(elect.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	lead, err := lk.Acquire(ctx, "app", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() { defer close(served); bus.Serve(sctx, lead) }()
	defer func() { stop(); <-served }()
	_, _, err = forward(t, ctx, dir, "app", instance.Options{AckTimeout: 2 * time.Second})
	if !errors.Is(err, instance.ErrNotInstance) {
		t.Fatalf("got %v, want ErrNotInstance", err)
	}
}

// TestPrimaryNotReading: a primary that runs but never takes invocations
// is reported as not responding, state running, within AckTimeout.
func TestPrimaryNotReading(t *testing.T) {
	dir := lockDir(t)
	p := startApp(t, dir, "app", "INST_NOREAD=1")
	p.expect(t, "primary ")
	_, _, err := forward(t, testCtx(t), dir, "app", instance.Options{AckTimeout: 300 * time.Millisecond})
	var nr *instance.NotRespondingError
	if !errors.As(err, &nr) || nr.PID != p.pid() || nr.State != "running" {
		t.Fatalf("got %v, want pid %d not responding, state running", err, p.pid())
	}
}

// TestPrimaryReturnsUnfinished: a primary whose function returns with an
// accepted invocation unfinished tells its caller (ErrAcceptedLost), which
// does not run it.
func TestPrimaryReturnsUnfinished(t *testing.T) {
	dir := lockDir(t)
	p := startApp(t, dir, "app", "INST_MAX=1")
	p.expect(t, "primary ")
	_, _, err := forward(t, testCtx(t), dir, "app", instance.Options{Args: [][]byte{[]byte("hold")}})
	if !errors.Is(err, instance.ErrAcceptedLost) || !strings.Contains(err.Error(), "returned without finishing") {
		t.Fatalf("got %v, want ErrAcceptedLost: returned without finishing", err)
	}
	p.expect(t, "primary-done")
}
