package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
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
// /dev/null for stdio and, as descriptor 3, one end of a socket pair
// (SOCK_SEQPACKET: a message a record) whose other end only leaderrun
// holds (every descriptor of leaderrun is close-on-exec). It may be
// started while leaderrun waits in line (Prepare), idle until its term
// begins, so that a term starts none; or as the term begins, with the
// term's first message already queued. The messages:
//
//	begin NUL id NUL cgroup NUL since NUL dir NUL name
//	                               the term begins: its id, cgroup (or
//	                               none), leaderrun's start time, lock
//	                               directory and name; with the name's
//	                               claim (see elect.Leadership.Claim)
//	                               attached (SCM_RIGHTS), if it has one
//	command <pid> <start> <pgid>   COMMAND (re)started
//	deadline <mono> <grace>        the term ends at CLOCK_MONOTONIC <mono> ns
//	                               unless a later deadline comes; <grace> ns
//	endterm <token>                how to end the term in its backend
//	stopping                       leaderrun is stopping COMMAND itself
//	end                            the term ended cleanly: exit
//
// The watchdog holds the claim until the term is over (ended cleanly, or
// fenced and its marker removed), so that a newcomer in a lock directory
// made anew at the path does not lead before this term's COMMAND is gone;
// the next holder, which waits for every claim of the name, then finds no
// marker left to fence a second time.
//
// The end of the socket before begin means no term began (the request was
// given up, or leaderrun died waiting): the watchdog exits. After begin,
// the end without "end" means leaderrun is gone: the watchdog fences the
// term as its successor would (cgroup.kill, or the process group and the
// term id), given an endterm token ends the term in its backend (etcd:
// revokes the lease), so that the next holder, on any host, is granted at
// once instead of after the lease's TTL, and then removes the marker.
// With a TermEnd.Prepare, it readies that end as it learns the token
// (PostgreSQL: opens the connection), so that the end is then one round
// trip.
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
const watchdogRole = "LEADERRUN_INTERNAL_ROLE"

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

// A watchdog is leaderrun's end of a watchdog's socket. Its methods do
// nothing on a nil *watchdog (none could be started).
type watchdog struct {
	pid   int
	conn  *os.File
	begun bool
}

// spawnWatchdog starts a watchdog in role, or returns nil if it cannot.
// With t, the term's begin is queued first, so that the watchdog knows its
// term from its first read even if leaderrun dies right after the start.
func spawnWatchdog(role string, t *Term) *watchdog {
	if strings.Contains(testFence, "nowatchdog") {
		return nil
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	theirs := os.NewFile(uintptr(fds[1]), "watchdog")
	defer theirs.Close()
	if unix.SetNonblock(fds[0], true) != nil {
		unix.Close(fds[0])
		return nil
	}
	wd := &watchdog{conn: os.NewFile(uintptr(fds[0]), "watchdog")}
	if t != nil && !wd.begin(t) {
		wd.conn.Close()
		return nil
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		wd.conn.Close()
		return nil
	}
	defer null.Close()
	// One P: the watchdog runs one goroutine, and a process of fewer
	// threads starts and exits sooner, beside the term's COMMAND.
	env := []string{watchdogRole + "=" + role, "GOMAXPROCS=1"}
	if testFence != "" {
		env = append(env, "TEST_LEADERRUN_FENCE="+testFence)
	}
	p, err := os.StartProcess("/proc/self/exe", []string{"leaderrun-watchdog"}, &os.ProcAttr{
		Env:   env,
		Dir:   "/", // not to keep the user's working directory busy
		Files: []*os.File{null, null, null, theirs},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		wd.conn.Close()
		return nil
	}
	wd.pid = p.Pid // Release sets p.Pid to -1
	watchdogPID.Store(int64(wd.pid))
	// Never waited for: it outlives leaderrun on purpose. As a child of
	// a subreaper its zombie is collected with COMMAND's orphans.
	p.Release()
	return wd
}

// startWatchdog starts the watchdog of the term t as it begins, or
// returns nil if it cannot; the term then relies on its successor's fence
// alone.
func startWatchdog(t *Term) *watchdog {
	role := roleEarly
	if t.token != "" {
		role = roleLate
	}
	return spawnWatchdog(role, t)
}

// prepareWatchdog starts a watchdog that waits, idle, for a term to begin
// (a prepared term's: see Prepare).
func prepareWatchdog() *watchdog { return spawnWatchdog(roleEarly, nil) }

// begin tells the watchdog of its term, and hands it the name's claim
// with it, if the term has one. It reports whether the message went.
func (wd *watchdog) begin(t *Term) bool {
	msg := strings.Join([]string{"begin", t.rec.id, t.rec.cgroup, strconv.FormatUint(t.rec.wstart, 10), t.d.Path(), t.name}, "\x00")
	var oob []byte
	if t.claim != nil {
		oob = unix.UnixRights(int(t.claim.Fd()))
	}
	rc, err := wd.conn.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		for {
			if serr = unix.Sendmsg(int(fd), []byte(msg), oob, nil, 0); serr != unix.EINTR {
				return serr != unix.EAGAIN
			}
		}
	}); err != nil || serr != nil {
		return false
	}
	wd.begun = true
	return true
}

// command tells the watchdog which COMMAND to kill.
func (wd *watchdog) command(r *termRecord) {
	if wd != nil {
		wd.conn.WriteString(commandMsg(r))
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
	fmt.Fprintf(wd.conn, "deadline %d %d\n", mono, int64(grace))
}

// say sends the watchdog one message line.
func (wd *watchdog) say(line string) {
	if wd != nil {
		wd.conn.WriteString(line + "\n")
	}
}

// close tells the watchdog that the term ended cleanly (or, before its
// term began, that none will).
func (wd *watchdog) close() {
	if wd != nil {
		if wd.begun {
			wd.conn.WriteString("end\n")
		}
		wd.conn.Close()
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
	begun    bool          // begin came: the term is this watchdog's
	dir      string        // the term's lock directory and name, from begin
	name     string
	claim    int // the descriptor of the name's claim, still open; -1 without
}

// closeClaim closes the name's claim, if this watchdog was given one.
func (w *watch) closeClaim() {
	if w.claim >= 0 {
		unix.Close(w.claim)
		w.claim = -1
	}
}

func runWatchdog(te TermEnd) int {
	endTerm := te.End
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTTIN, syscall.SIGTTOU)
	w := &watch{prepare: te.Prepare, claim: -1}
	defer func() {
		if w.release != nil {
			w.release()
		}
	}()
	ms, err := openMessages()
	if err != nil {
		return 2
	}
	if !w.follow(ms) {
		return 0 // the term ended cleanly, or none began
	}
	if !validTermID(w.r.id) {
		return 2
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
	d, err := oslock.OpenDir(w.dir, oslock.DirOptions{GroupShared: true, AllowUnsafeFS: true})
	if err == nil {
		d.Remove(layout.TermMarkerPrefix(w.name) + w.r.id)
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
		elect.Nudge(w.dir, w.name)
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

// A message is one record of the watchdog's socket, without its
// newline, with the descriptor that came with it (-1 if none).
type message struct {
	text string
	fd   int
}

// messages reads the records of the watchdog's socket, descriptor 3, in
// blocking system calls on the calling thread, not through the runtime's
// poller: the watchdog has nothing else to do, and a record then wakes one
// thread (through the poller it woke the poller's thread, which handed the
// record to the main thread that init locks: three wake-ups, on the path
// of every hand-off).
type messages struct {
	buf []byte
	oob []byte
}

func openMessages() (*messages, error) {
	if err := unix.SetNonblock(3, false); err != nil {
		return nil, err
	}
	return &messages{buf: make([]byte, 1<<16), oob: make([]byte, unix.CmsgSpace(4))}, nil
}

// next returns the next record, io.EOF at the socket's end, or
// os.ErrDeadlineExceeded once until passes (none if zero).
func (ms *messages) next(until time.Time) (message, error) {
	for !until.IsZero() {
		left := time.Until(until)
		if left <= 0 {
			return message{}, os.ErrDeadlineExceeded
		}
		ts := unix.NsecToTimespec(int64(left))
		n, err := unix.Ppoll([]unix.PollFd{{Fd: 3, Events: unix.POLLIN}}, &ts, nil)
		if err == nil && n > 0 {
			break
		}
		if err != nil && err != unix.EINTR {
			return message{}, err
		}
	}
	var n, oobn int
	var err error
	for {
		if n, oobn, _, _, err = unix.Recvmsg(3, ms.buf, ms.oob, unix.MSG_CMSG_CLOEXEC); err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return message{}, err
	}
	if n == 0 && oobn == 0 {
		return message{}, io.EOF
	}
	m := message{text: strings.TrimSuffix(string(ms.buf[:n]), "\n"), fd: -1}
	if cms, err := unix.ParseSocketControlMessage(ms.oob[:oobn]); err == nil {
		for _, cm := range cms {
			fds, _ := unix.ParseUnixRights(&cm)
			for _, f := range fds {
				if m.fd < 0 {
					m.fd = f
				} else {
					unix.Close(f)
				}
			}
		}
	}
	return m, nil
}

// beginTerm takes the term of a begin message: id, cgroup, leaderrun's
// start time, lock directory and name, NUL-separated, and fd, its claim
// (-1 without). A second begin is ignored.
func (w *watch) beginTerm(val string, fd int) {
	f := strings.Split(val, "\x00")
	if w.begun || len(f) != 5 {
		if fd >= 0 {
			unix.Close(fd)
		}
		return
	}
	w.begun, w.claim = true, fd
	w.r.id, w.r.cgroup, w.dir, w.name = f[0], f[1], f[3], f[4]
	w.r.wstart, _ = strconv.ParseUint(f[2], 10, 64)
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
// has ended cleanly, or none began (false).
func (w *watch) follow(ms *messages) bool {
	var deadline, killAt time.Time // zero: none
	for {
		until := deadline
		if !killAt.IsZero() {
			until = killAt
		}
		m, err := ms.next(until)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			if !killAt.IsZero() {
				return true
			}
			// leaderrun did not renew the term in time: it is stopped or
			// starved, or it is stopping COMMAND itself (stopping).
			if !w.stopping {
				termCommand(&w.r)
			}
			deadline, killAt = time.Time{}, time.Now().Add(w.grace)
			continue
		case err != nil:
			return w.begun // leaderrun is gone; before begin, no term began
		}
		if key, val, _ := strings.Cut(m.text, "\x00"); key == "begin" {
			w.beginTerm(val, m.fd)
			continue
		}
		if m.fd >= 0 {
			unix.Close(m.fd)
		}
		key, val, _ := strings.Cut(m.text, " ")
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
			if killAt.IsZero() {
				deadline = w.setDeadline(val, deadline)
			}
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

// setDeadline reads "<mono> <grace>" and returns when the watchdog acts
// on it; an unreadable message keeps the last deadline, was.
func (w *watch) setDeadline(val string, was time.Time) time.Time {
	var mono, grace int64
	var now unix.Timespec
	if _, err := fmt.Sscanf(val, "%d %d", &mono, &grace); err != nil || grace < 0 || unix.ClockGettime(unix.CLOCK_MONOTONIC, &now) != nil {
		return was
	}
	w.grace = time.Duration(grace)
	// time.Now's monotonic reading is CLOCK_MONOTONIC.
	return time.Now().Add(time.Duration(mono-now.Nano()) + deadlineSlack)
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
