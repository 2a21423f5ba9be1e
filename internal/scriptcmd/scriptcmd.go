//go:build unix

// Package scriptcmd holds the custom testscript commands of leaderrun's
// CLI tests: the root module's testscripts/ and leaderrun-etcd's in etcd/.
// Every wait is bounded (a default, or -t DURATION), and a signal goes only
// to a pid that the script wrote to a file, never to one below 2; a process
// the script stopped is continued when the script ends, so that a failing
// script fails instead of hanging on it.
package scriptcmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/leaderrun/leaderrun/oslock"
)

// Runner runs leaderrun outside the script (for waitleader and
// waitqueue), as the script's own leaderrun would reach the same locks.
type Runner func(ts *testscript.TestScript, args ...string) ([]byte, error)

// Cmd is a testscript command.
type Cmd = func(ts *testscript.TestScript, neg bool, args []string)

// Commands returns waitfile, waitleader, waitqueue, waitsocket, sleep,
// sigpid, contatend, gone and stopwatch; run serves the two that ask leaderrun,
// and timeout bounds every wait that gives no -t.
func Commands(run Runner, timeout time.Duration) map[string]Cmd {
	c := cmds{run: run, timeout: timeout}
	return map[string]Cmd{
		"waitfile":   c.waitfile,
		"waitleader": c.waitleader,
		"waitqueue":  c.waitqueue,
		"waitsocket": c.waitsocket,
		"sleep":      sleep,
		"sigpid":     sigpid,
		"contatend":  contatend,
		"gone":       gone,
		"stopwatch":  stopwatch,
	}
}

type cmds struct {
	run     Runner
	timeout time.Duration
}

func (c cmds) timeoutArg(ts *testscript.TestScript, args []string) (time.Duration, []string) {
	if len(args) >= 2 && args[0] == "-t" {
		d, err := time.ParseDuration(args[1])
		ts.Check(err)
		return d, args[2:]
	}
	return c.timeout, args
}

// poll calls ok until it reports true or d passes, then fails with what.
func poll(ts *testscript.TestScript, d time.Duration, what string, ok func() bool) {
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			ts.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitfile [-t DURATION] [-n N] FILE [TEXT]: wait until FILE exists (and
// holds TEXT, N times with -n).
func (c cmds) waitfile(ts *testscript.TestScript, neg bool, args []string) {
	d, args := c.timeoutArg(ts, args)
	n := 1
	if len(args) >= 2 && args[0] == "-n" {
		var err error
		n, err = strconv.Atoi(args[1])
		ts.Check(err)
		args = args[2:]
	}
	if neg || len(args) < 1 || len(args) > 2 || (n != 1 && len(args) != 2) {
		ts.Fatalf("usage: waitfile [-t DURATION] [-n N] FILE [TEXT]")
	}
	path := ts.MkAbs(args[0])
	poll(ts, d, strings.Join(args, " "), func() bool {
		b, err := os.ReadFile(path)
		return err == nil && (len(args) == 1 || bytes.Count(b, []byte(args[1])) >= n)
	})
}

// waitleader [-t DURATION] NAME: wait until somebody leads NAME.
// ! waitleader NAME: wait until nobody does.
func (c cmds) waitleader(ts *testscript.TestScript, neg bool, args []string) {
	d, args := c.timeoutArg(ts, args)
	if len(args) != 1 {
		ts.Fatalf("usage: waitleader [-t DURATION] NAME")
	}
	what := "a leader of " + args[0]
	if neg {
		what = "no leader of " + args[0]
	}
	poll(ts, d, what, func() bool {
		_, err := c.run(ts, "who", args[0])
		return (err == nil) != neg
	})
}

// waitqueue [-t DURATION] NAME N: wait until N requests wait in NAME's queue.
func (c cmds) waitqueue(ts *testscript.TestScript, neg bool, args []string) {
	d, args := c.timeoutArg(ts, args)
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitqueue [-t DURATION] NAME N")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	poll(ts, d, args[1]+" waiting for "+args[0], func() bool {
		out, err := c.run(ts, "status", args[0], "--json")
		var snap struct{ Pending []json.RawMessage }
		return err == nil && json.Unmarshal(out, &snap) == nil && len(snap.Pending) == n
	})
}

// waitsocket [-t DURATION] FILE: wait until the process whose pid is in
// FILE holds a socket (publish, subscribe or a later single instance has
// connected to its leader: they hold no other). Without /proc it does not
// wait.
func (c cmds) waitsocket(ts *testscript.TestScript, neg bool, args []string) {
	d, args := c.timeoutArg(ts, args)
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitsocket [-t DURATION] FILE")
	}
	if runtime.GOOS != "linux" {
		return
	}
	fds := "/proc/" + strconv.Itoa(pidIn(ts, args[0])) + "/fd/"
	poll(ts, d, "a socket in "+fds, func() bool {
		ents, _ := os.ReadDir(fds)
		for _, e := range ents {
			if l, err := os.Readlink(fds + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
				return true
			}
		}
		return false
	})
}

// sleep DURATION
func sleep(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: sleep DURATION")
	}
	d, err := time.ParseDuration(args[0])
	ts.Check(err)
	time.Sleep(d)
}

// pidIn reads the pid in file, refusing one below 2 (kill(2) would take
// -1 for every process, 0 for the test's group).
func pidIn(ts *testscript.TestScript, file string) int {
	// A shell's `echo $$ > FILE` makes FILE before it writes the line:
	// waitfile may return in between. The line is waited for, briefly.
	var b []byte
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b, err = os.ReadFile(ts.MkAbs(file))
		if err != nil || bytes.HasSuffix(b, []byte("\n")) || time.Now().After(deadline) {
			break
		}
	}
	ts.Check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	ts.Check(err)
	if pid < 2 {
		ts.Fatalf("%s holds pid %d: refusing to signal it", file, pid)
	}
	return pid
}

// sigpid SIGNAL FILE: send SIGNAL (TERM, HUP, USR1, KILL, STOP, CONT, ...)
// to the pid in FILE.
func sigpid(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: sigpid SIGNAL FILE")
	}
	sigs := map[string]syscall.Signal{"INT": syscall.SIGINT, "TERM": syscall.SIGTERM, "HUP": syscall.SIGHUP,
		"QUIT": syscall.SIGQUIT, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "KILL": syscall.SIGKILL,
		"STOP": syscall.SIGSTOP, "CONT": syscall.SIGCONT}
	sig, ok := sigs[args[0]]
	if !ok {
		ts.Fatalf("unknown signal %s", args[0])
	}
	pid := pidIn(ts, args[1])
	if sig == syscall.SIGSTOP {
		contAtEnd(ts, pid)
	}
	ts.Check(syscall.Kill(pid, sig))
	if sig == syscall.SIGSTOP {
		// kill(2) returns before the process has stopped: what the
		// script does next must find it stopped.
		poll(ts, 5*time.Second, fmt.Sprintf("pid %d to stop", pid), func() bool {
			return oslock.StateOf(pid) != oslock.ProcRunning
		})
	}
}

// contAtEnd continues pid when the script ends, before testscript
// interrupts and waits for its background commands: a stopped one would
// never exit, and a failing script would hang instead of failing.
func contAtEnd(ts *testscript.TestScript, pid int) {
	if pid > 1 {
		ts.Defer(func() { syscall.Kill(pid, syscall.SIGCONT) })
	}
}

// contatend FILE: the process whose pid is in FILE (when the script ends)
// is continued then, for a script that stops it by other means than
// sigpid (kill -STOP in a shell line).
func contatend(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: contatend FILE")
	}
	ts.Defer(func() {
		b, err := os.ReadFile(ts.MkAbs(args[0]))
		if err != nil {
			return
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	})
}

// gone FILE: the process whose pid is in FILE no longer runs (gone or a
// zombie), within goneWait. ! gone FILE: it still runs.
func gone(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: gone FILE")
	}
	if runtime.GOOS != "linux" {
		ts.Fatalf("gone reads /proc/PID/stat: give the script [!linux] skip")
	}
	pid := pidIn(ts, args[0])
	dead := func() bool { return oslock.StateOf(pid) == oslock.ProcGone }
	if neg {
		if dead() {
			ts.Fatalf("process %d: gone=true, want false", pid)
		}
		return
	}
	// A process that was killed takes a moment to exit after it has let
	// go of its locks: wait for that, not for anything slower.
	deadline := time.Now().Add(goneWait)
	for !dead() {
		if time.Now().After(deadline) {
			ts.Fatalf("process %d: gone=false after %v, want true", pid, goneWait)
		}
		time.Sleep(time.Millisecond)
	}
}

// goneWait bounds how long gone waits for a process that is exiting.
const goneWait = 2 * time.Second

// stopwatch start | stopwatch MIN MAX: the time since start lies in
// [MIN, MAX]. Only for bounds an order of magnitude apart from what would
// be wrong (a TTL waited out instead of a revoke), never for performance.
func stopwatch(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: stopwatch start | stopwatch MIN MAX")
	}
	if args[0] == "start" {
		ts.Setenv("STOPWATCH", strconv.FormatInt(time.Now().UnixNano(), 10))
		return
	}
	if len(args) != 2 {
		ts.Fatalf("usage: stopwatch start | stopwatch MIN MAX")
	}
	start, err := strconv.ParseInt(ts.Getenv("STOPWATCH"), 10, 64)
	ts.Check(err)
	lo, err := time.ParseDuration(args[0])
	ts.Check(err)
	hi, err := time.ParseDuration(args[1])
	ts.Check(err)
	if el := time.Since(time.Unix(0, start)); el < lo || el > hi {
		ts.Fatalf("%s elapsed, want between %s and %s", el, lo, hi)
	}
}
