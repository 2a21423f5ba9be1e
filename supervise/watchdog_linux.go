package supervise

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/layout"
	"github.com/leaderrun/leaderrun/oslock"
)

// The watchdog is what a term leaves behind so that its COMMAND and
// everything COMMAND started go when leaderrun dies, even with no
// successor to fence them: Pdeathsig reaches only COMMAND itself, not its
// process group or what called setsid.
//
// It is leaderrun itself (/proc/self/exe) in a hidden role, in a process
// group of its own (so that Ctrl-C and hang-up do not reach it), with
// /dev/null for stdio and, as descriptor 3, the read end of a pipe whose
// write end only leaderrun holds (every descriptor of leaderrun is
// close-on-exec), and as descriptor 4 the name's claim (see
// elect.Leadership.Claim), which it holds until the term is over (ended
// cleanly, or fenced and its marker removed) so that a newcomer in a lock
// directory made anew at the path does not lead before this term's
// COMMAND is gone; the next holder, which waits for every claim of the
// name, then finds no marker left to fence a second time. It reads
// lines, one message each:
//
//	command <pid> <start> <pgid>   COMMAND (re)started
//	deadline <mono> <grace>        the term ends at CLOCK_MONOTONIC <mono> ns
//	                               unless a later deadline comes; <grace> ns
//	endterm <token>                how to end the term in its backend
//	stopping                       leaderrun is stopping COMMAND itself
//	end                            the term ended cleanly: exit
//
// End of file without "end" means leaderrun is gone: the watchdog fences
// the term as its successor would (cgroup.kill, or the process group and
// the term id), given an endterm token ends the term in its backend
// (etcd: revokes the lease), so that the next holder, on any host, is
// granted at once instead of after the lease's TTL, and then removes the
// marker. With a TermEnd.Prepare, it readies that end as it learns the
// token (PostgreSQL: opens the connection), so that the end is then one
// round trip.
//
// A term with a deadline (a lease that leaderrun must renew, etcd's) also
// ends when the deadline passes without a later one: leaderrun stopped
// (SIGSTOP, Ctrl-Z) or starved cannot renew the lease, nor stop COMMAND,
// and another host may be granted once the lease expires. So the watchdog
// sends SIGTERM to COMMAND's process group at the deadline (unless
// leaderrun said it is stopping COMMAND itself), SIGKILL to all of the
// term after grace, and then ends the term as above. The deadline is
// grace and a margin before the lease can expire on the server (see
// leaderrun-etcd's --ttl), so COMMAND is gone before anyone else is
// granted. Unknown messages are skipped, so that a later version can add
// one.
const (
	watchdogRole   = "LEADERRUN_INTERNAL_ROLE"
	watchdogTerm   = "LEADERRUN_WATCHDOG_TERM"
	watchdogCgroup = "LEADERRUN_WATCHDOG_CGROUP"
	watchdogDir    = "LEADERRUN_WATCHDOG_DIR"
	watchdogName   = "LEADERRUN_WATCHDOG_NAME"
	watchdogSince  = "LEADERRUN_WATCHDOG_SINCE" // leaderrun's start time
	watchdogClaim  = "LEADERRUN_WATCHDOG_CLAIM" // "4": descriptor 4 is the claim
)

// A watchdog that has a backend's term to end (App.ender) runs in Main,
// once the app that knows how is built (roleLate); the others run as the
// program starts, before anything else.
const (
	roleEarly = "watchdog"
	roleLate  = "watchdog-late"
)

func init() {
	if os.Getenv(watchdogRole) == roleEarly {
		os.Exit(runWatchdog(TermEnd{}))
	}
}

// runWatchdogRole is RunWatchdog: the late role's watchdog.
func runWatchdogRole(te TermEnd) (code int, ok bool) {
	if os.Getenv(watchdogRole) != roleLate {
		return 0, false
	}
	return runWatchdog(te), true
}

// watchdogPID is the pid of this process's watchdog, which stop and alive
// must not count among COMMAND's descendants.
var watchdogPID atomic.Int64

func isWatchdog(pid int) bool { return pid > 0 && int64(pid) == watchdogPID.Load() }

type watchdog struct {
	pid int
	w   *os.File
}

// startWatchdog starts the term's watchdog, or returns nil if it cannot;
// the term then relies on its successor's fence alone.
func startWatchdog(t *Term) *watchdog {
	if strings.Contains(testFence, "nowatchdog") {
		return nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	defer r.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		w.Close()
		return nil
	}
	defer null.Close()
	role := roleEarly
	if t.token != "" {
		role = roleLate
	}
	files := []*os.File{null, null, null, r}
	env := []string{
		watchdogRole + "=" + role,
		watchdogTerm + "=" + t.rec.id,
		watchdogCgroup + "=" + t.rec.cgroup,
		watchdogDir + "=" + t.d.Path(),
		watchdogName + "=" + t.name,
		watchdogSince + "=" + strconv.FormatUint(t.rec.wstart, 10),
	}
	if t.claim != nil {
		// Descriptor 4: the name's claim outside the lock directory,
		// kept until the term is fenced (see elect.Leadership.Claim).
		files = append(files, t.claim)
		env = append(env, watchdogClaim+"=4")
	}
	if testFence != "" {
		env = append(env, "TEST_LEADERRUN_FENCE="+testFence)
	}
	p, err := os.StartProcess("/proc/self/exe", []string{"leaderrun-watchdog", t.name}, &os.ProcAttr{
		Env:   env,
		Dir:   "/", // not to keep the user's working directory busy
		Files: files,
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		w.Close()
		return nil
	}
	pid := p.Pid // Release sets p.Pid to -1
	watchdogPID.Store(int64(pid))
	// Never waited for: it outlives leaderrun on purpose. As a child of
	// a subreaper its zombie is collected with COMMAND's orphans.
	p.Release()
	return &watchdog{pid: pid, w: w}
}

// command tells the watchdog which COMMAND to kill.
func (wd *watchdog) command(r *termRecord) {
	if wd != nil {
		wd.w.WriteString(commandMsg(r))
	}
}

// deadline tells the watchdog when the term ends unless renewed, and the
// grace COMMAND then has between SIGTERM and SIGKILL.
func (wd *watchdog) deadline(at time.Time, grace time.Duration) {
	if wd == nil {
		return
	}
	var now unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &now) != nil {
		return
	}
	// time.Until reads Go's monotonic clock, which is CLOCK_MONOTONIC.
	mono := now.Nano() + int64(time.Until(at))
	fmt.Fprintf(wd.w, "deadline %d %d\n", mono, int64(grace))
}

// say sends the watchdog one message line.
func (wd *watchdog) say(line string) {
	if wd != nil {
		wd.w.WriteString(line + "\n")
	}
}

// close tells the watchdog that the term ended cleanly.
func (wd *watchdog) close() {
	if wd != nil {
		wd.w.WriteString("end\n")
		wd.w.Close()
	}
}

// watch is what the watchdog knows of its term.
type watch struct {
	r        termRecord
	token    string // endterm: how to end the term in its backend
	prepare  func(token string) (end func(context.Context) error, release func())
	end      func(context.Context) error // readied by prepare for token
	release  func()
	grace    time.Duration // from the last deadline
	stopping bool          // leaderrun is stopping COMMAND itself
	timer    *time.Timer   // fires at the last deadline; nil without one
	claim    bool          // descriptor 4 is the name's claim, still open
}

// closeClaim closes the name's claim, descriptor 4, if this watchdog was
// given one (without one, descriptor 4 may be anything the runtime opened
// since, such as its poller's).
func (w *watch) closeClaim() {
	if w.claim {
		unix.Close(4)
		w.claim = false
	}
}

func runWatchdog(te TermEnd) int {
	endTerm := te.End
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTTIN, syscall.SIGTTOU)
	w := &watch{r: termRecord{id: os.Getenv(watchdogTerm), cgroup: os.Getenv(watchdogCgroup)}, prepare: te.Prepare, claim: os.Getenv(watchdogClaim) == "4"}
	defer func() {
		if w.release != nil {
			w.release()
		}
	}()
	w.r.wstart, _ = strconv.ParseUint(os.Getenv(watchdogSince), 10, 64)
	if !validTermID(w.r.id) {
		return 2
	}
	if !w.follow(readLines(os.NewFile(3, "watchdog"))) {
		return 0 // the term ended cleanly
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*fenceBudget)
	defer cancel()
	if !fenceTerm(ctx, &w.r) {
		return 1
	}
	// The term ends in its backend before its marker goes: a watchdog
	// killed between the two leaves the marker, which tells a waiter on
	// this host that the term did not end cleanly (OutliveHolder) and the
	// next holder here to fence it, never a marker gone with the term
	// still running to its TTL. An end that fails leaves the marker.
	if w.endInBackend(ctx, endTerm) != nil {
		return 1
	}
	stopAt("halfway")
	// The watchdog is another process: it can only reopen the directory by
	// path. That is safe: it removes one file, its term's marker, named by
	// the term's random 128-bit id, which no directory put at the path
	// since can hold.
	d, err := oslock.OpenDir(os.Getenv(watchdogDir), oslock.DirOptions{GroupShared: true, AllowUnsafeFS: true})
	if err == nil {
		d.Remove(layout.TermMarkerPrefix(os.Getenv(watchdogName)) + w.r.id)
		d.Close()
	}
	// The term is over and its marker gone: the claim goes now, not at
	// this process's exit,
	// so that the next holder, which waits for it, is granted without
	// waiting for the nudge below or for the exit, and finds no marker
	// to fence a second time.
	w.closeClaim()
	if err == nil {
		// leaderrun died holding the lock: the waiters next in line
		// learn of it by themselves unless they are stopped.
		elect.Nudge(os.Getenv(watchdogDir), os.Getenv(watchdogName))
	}
	stopAt("exiting")
	return 0
}

// stopAt stops this process (SIGSTOP) where a test wants it, with hook in
// TEST_LEADERRUN_FENCE, so that tests can look at it or kill it there:
// "halfway" between the end of a dead term in its backend and the removal
// of its marker, "exiting" once all is done, before the exit.
func stopAt(hook string) {
	if strings.Contains(testFence, hook) {
		_ = unix.Kill(os.Getpid(), unix.SIGSTOP)
	}
}

// readLines sends the lines of f, without their newline, until its end.
func readLines(f *os.File) <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		in := bufio.NewReader(f)
		for {
			line, err := in.ReadString('\n')
			if err != nil {
				return
			}
			lines <- strings.TrimSuffix(line, "\n")
		}
	}()
	return lines
}

// endInBackend ends the term in its backend: with the end readied for its
// token (TermEnd.Prepare), else with endTerm; nothing without a token.
func (w *watch) endInBackend(ctx context.Context, endTerm func(ctx context.Context, token string) error) error {
	switch {
	case w.end != nil:
		return w.end(ctx)
	case w.token != "" && endTerm != nil:
		return endTerm(ctx, w.token)
	}
	return nil
}

// follow reads leaderrun's messages until the term must be fenced (true:
// leaderrun is gone, or its deadline passed and COMMAND had its grace) or
// has ended cleanly (false).
func (w *watch) follow(lines <-chan string) bool {
	var deadline, killAt <-chan time.Time
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				return true // leaderrun is gone
			}
			key, val, _ := strings.Cut(line, " ")
			switch key {
			case "end":
				// The term ended cleanly: the claim goes at once, so
				// that the next holder does not wait for this exit.
				w.closeClaim()
				return false
			case "command":
				var c termRecord
				if parseCommand(val, &c) {
					w.r.cpid, w.r.cstart, w.r.pgid, w.r.commandStarted = c.cpid, c.cstart, c.pgid, true
				}
			case "endterm":
				w.endTerm(val)
			case "stopping":
				w.stopping = true
			case "deadline":
				if killAt == nil {
					deadline = w.setDeadline(val)
				}
			}
		case <-deadline:
			// leaderrun did not renew the term in time: it is stopped or
			// starved, or it is stopping COMMAND itself (stopping).
			deadline = nil
			if !w.stopping {
				termCommand(&w.r)
			}
			killAt = time.After(w.grace)
		case <-killAt:
			return true
		}
	}
}

// endTerm takes the token that ends the term in its backend, and readies
// that end when it can (TermEnd.Prepare): a new token releases what the
// last one readied.
func (w *watch) endTerm(token string) {
	if w.prepare != nil && token != w.token {
		if w.release != nil {
			w.release()
		}
		w.end, w.release = w.prepare(token)
	}
	w.token = token
}

// setDeadline reads "<mono> <grace>" and returns a channel that fires
// then; an unreadable message keeps the last deadline.
func (w *watch) setDeadline(val string) <-chan time.Time {
	var mono, grace int64
	var now unix.Timespec
	if _, err := fmt.Sscanf(val, "%d %d", &mono, &grace); err != nil || grace < 0 || unix.ClockGettime(unix.CLOCK_MONOTONIC, &now) != nil {
		if w.timer == nil {
			return nil
		}
		return w.timer.C
	}
	w.grace = time.Duration(grace)
	if w.timer != nil {
		w.timer.Stop()
	}
	w.timer = time.NewTimer(time.Duration(mono-now.Nano()) + deadlineSlack)
	return w.timer.C
}

// deadlineSlack is how long after a deadline the watchdog acts, so that a
// leaderrun that is running, and stops COMMAND itself at the deadline,
// says so (stopping) first and COMMAND gets one SIGTERM, not two. It is
// well inside the second of margin that leaderrun-etcd leaves after
// --grace.
const deadlineSlack = 100 * time.Millisecond

// termCommand sends SIGTERM to the term's COMMAND and, when it leads its
// process group, to the group, as killCommand does SIGKILL.
func termCommand(r *termRecord) {
	if !r.commandStarted || foreignPids(r) {
		return
	}
	pidfd, err := oslock.OpenPidfd(r.cpid)
	if err != nil {
		return
	}
	defer pidfd.Close()
	if start, ok := procStart(r.cpid); !ok || start != r.cstart {
		return
	}
	if rc, err := pidfd.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { _ = unix.PidfdSendSignal(int(fd), unix.SIGTERM, nil, 0) })
	}
	if r.pgid == r.cpid && r.pgid > 1 {
		_ = unix.Kill(-r.pgid, unix.SIGTERM)
	}
}
