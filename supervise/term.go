package supervise

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/layout"
	"github.com/leaderrun/leaderrun/oslock"
)

// TermEnd is how a term's watchdog, a process of its own, ends the term in
// its backend once COMMAND is gone, from the token given to Term.Expire
// (see RunWatchdog).
type TermEnd struct {
	// End ends the term that token names.
	End func(ctx context.Context, token string) error
	// Prepare, if not nil, is called as the watchdog learns the token,
	// returns at once and readies the end in the background (opens a
	// connection, say): end then ends the term as End would, over what
	// was readied if that still serves and afresh otherwise, and release
	// frees what was readied. The watchdog calls end (then release) once
	// COMMAND is gone, or release alone when the term ended cleanly.
	Prepare func(token string) (end func(ctx context.Context) error, release func())
}

// ErrNoWatchdog is Term.Expire's error when the term's watchdog cannot be
// started.
var ErrNoWatchdog = errors.New("cannot start the watchdog that stops COMMAND should this leaderrun be stopped past its lease")

// Term is a supervisor's term: its marker, its cgroup and its watchdog.
// A nil *Term (no fence on this platform) does nothing.
type Term struct {
	d    *oslock.Dir
	name string
	file string // the marker's name in d
	f    *os.File
	rec  termRecord
	cg   *termCgroup
	buf  []byte // the record as last written to f

	token string   // the backend's TermToken, for the watchdog (TermEnder)
	claim *os.File // elect.Leadership.Claim: the watchdog keeps a copy

	mu      sync.Mutex // guards rec, wd, pre, wdTimer and ended against the timer
	wd      *watchdog
	pre     *watchdog // started while waiting (Prepare), its term not begun
	wdTimer *time.Timer
	ended   bool
}

// watchdogDelay is how long COMMAND runs before the watchdog of a term
// that claims no name (a shared one) is started: a COMMAND that is over
// sooner does not pay for starting a process, and one that leaderrun dies
// sooner than that with is left to the next holder's fence. A term that
// claims its name starts its watchdog before COMMAND (Term.startWatchdog).
const watchdogDelay = 20 * time.Millisecond

// beginTerm fences off what earlier terms of name left running, then marks
// this term; end undoes the mark once COMMAND has been stopped. It returns
// once every leftover it found is gone, or after a bounded wait, also when
// ctx is cancelled: a fence cut short would let the new COMMAND overlap
// the old one.
func beginTerm(ctx context.Context, dir, name string, exclusive bool, p *Prepared) *Term {
	if !fenceSupported {
		p.Close()
		return nil
	}
	// Reopened by path with the checks elect made already (do not refuse
	// what it took); beginTermIn is for the checked directory itself.
	d, err := oslock.OpenDir(dir, oslock.DirOptions{GroupShared: true, AllowUnsafeFS: true})
	if err != nil {
		p.Close()
		return nil
	}
	return beginTermIn(ctx, d, name, exclusive, p)
}

// Begin begins the term of lead: it fences off what earlier terms of
// lead's name left running (see the package doc), then marks this term,
// in the directory lead was granted in (elect.Leadership.OpenDir) or,
// for a backend without one, in the lock directory dir, reopened. End
// undoes the mark once COMMAND has been stopped. Begin returns once every
// leftover it found is gone, or after a bounded wait, also when ctx is
// cancelled: a fence cut short would let the new COMMAND overlap the old
// one. It returns nil where there is no fence (not Linux), or when the
// marker cannot be made.
// p, if not nil, is the term prepared while waiting (Prepare): the term
// takes its id and cgroup.
func Begin(ctx context.Context, lead *elect.Leadership, dir string, p *Prepared) *Term {
	exclusive := lead.Mode() == elect.Exclusive
	var t *Term
	if d, err := lead.OpenDir(); err == nil {
		t = beginTermIn(ctx, d, lead.Name(), exclusive, p)
	} else {
		t = beginTerm(ctx, dir, lead.Name(), exclusive, p)
	}
	if t != nil {
		t.claim = lead.Claim()
	}
	return t
}

// beginTermIn is beginTerm in the lock directory d, which the term then
// owns (and closes).
func beginTermIn(ctx context.Context, d *oslock.Dir, name string, exclusive bool, p *Prepared) *Term {
	if !fenceSupported {
		d.Close()
		p.Close()
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fenceBudget)
	defer cancel()
	var err error
	fenceDir(ctx, d, name, exclusive)
	t := &Term{d: d, name: name}
	id, cg, pre, marker, ok := p.take()
	if !ok {
		id, cg, pre, marker = newTermID(), nil, nil, nil
	}
	t.pre = pre
	t.rec = termRecord{id: id, wpid: os.Getpid(), wstart: selfStart(), pidns: selfPidNS}
	t.file = layout.TermMarkerPrefix(name) + t.rec.id
	if t.f, err = nameMarker(d, t.file, marker); err != nil {
		d.Close()
		pre.close()
		if cg != nil {
			cg.remove(ctx)
		}
		return nil
	}
	if !ok {
		cg = newTermCgroup(t.rec.id)
	}
	if t.cg = cg; t.cg != nil {
		t.rec.cgroup = t.cg.path
	}
	t.write()
	return t
}

// nameMarker makes the marker file in d: the unnamed inode made while
// waiting (Prepare), if there is one and it can be named there, else a new
// file. Like O_EXCL, it fails if file exists.
func nameMarker(d *oslock.Dir, file string, unnamed *os.File) (*os.File, error) {
	if unnamed != nil {
		err := d.LinkUnnamed(unnamed, file)
		if err == nil {
			return unnamed, nil
		}
		unnamed.Close()
		if !errors.Is(err, oslock.ErrUnsupported) {
			return nil, err
		}
	}
	return d.OpenFile(file, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
}

// newTermID is a term's random id, 32 hex digits.
func newTermID() string {
	var id [termIDLen / 2]byte
	rand.Read(id[:])
	return hex.EncodeToString(id[:])
}

// fenceDir fences every term of name that is over but was not ended
// cleanly. As exclusive holder, that is every term but this one: the
// kernel drops a killed leaderrun's flock before the process is gone, so
// its successor often finds it still running. A shared holder spares the
// terms of other shared holders: those whose leaderrun still runs and
// still holds the lock (proc(5) /proc/locks).
func fenceDir(ctx context.Context, d *oslock.Dir, name string, exclusive bool) {
	names, err := d.Names()
	if err != nil {
		return
	}
	var holders map[int]bool
	live := func(r *termRecord) bool {
		switch {
		case exclusive:
			return false
		case foreignPids(r):
			return true // its pids mean nothing here: spare it
		case !wrapperAlive(r):
			return false
		}
		if holders == nil {
			holders = lockHolders(d, layout.LockFile(name))
		}
		return holders == nil || holders[r.wpid]
	}
	for _, file := range names {
		if file == name+".cmd" {
			// The pid-only marker of leaderrun before term ids: it
			// says nothing the fence could use safely.
			d.Remove(file)
			continue
		}
		id := markerID(file, name)
		if id == "" {
			continue
		}
		r, err := readMarker(d, file)
		if err != nil || r.id != id {
			if exclusive {
				// Its leaderrun died between creating and writing
				// it, before COMMAND could start.
				d.Remove(file)
			}
			continue // a shared holder may be writing it
		}
		if live(r) {
			continue
		}
		if fenceTerm(ctx, r) {
			d.Remove(file)
		}
	}
}

// write rewrites the marker in place: one pwrite(2) of a few hundred
// bytes, so that a SIGKILL leaves either version; a longer earlier version
// leaves a tail after "." that readers ignore until the truncate.
func (t *Term) write() {
	was := len(t.buf)
	t.buf = t.rec.appendTo(t.buf[:0])
	// The marker is made empty: it needs truncating only when a record
	// is shorter than the one before (a restarted COMMAND's pid).
	if _, err := t.f.WriteAt(t.buf, 0); err == nil && len(t.buf) < was {
		t.f.Truncate(int64(len(t.buf)))
	}
}

// Environ adds this term's id to COMMAND's environment.
func (t *Term) Environ(env []string) []string {
	if t == nil {
		return env
	}
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, termEnv+"=") {
			out = append(out, kv)
		}
	}
	return append(out, termEnv+"="+t.rec.id)
}

// Start starts COMMAND in this term (in its cgroup, if it has one) and
// records it in the marker and with the watchdog.
func (t *Term) Start(argv, env []string, stdout io.Writer) (*Command, error) {
	if t == nil {
		return startChild(argv, env, stdout)
	}
	if t.claim != nil {
		t.startWatchdog()
	}
	var ch *Command
	var err error
	if t.cg != nil {
		if ch, err = startChild(argv, env, stdout, t.cg.prepare); err != nil {
			// Not allowed to move a process there after all (a
			// cgroup we may create but not populate, or no clone3):
			// without it, for the rest of the term.
			t.dropCgroup()
		} else {
			ch.cgroup = t.cg.path // what is left of COMMAND is asked of its cgroup
		}
	}
	if ch == nil {
		if ch, err = startChild(argv, env, stdout); err != nil {
			return nil, err
		}
	}
	t.record(ch)
	return ch, nil
}

// dropCgroup gives up the term's cgroup, for the rest of the term.
func (t *Term) dropCgroup() {
	t.cg.remove(context.Background())
	t.mu.Lock()
	t.cg, t.rec.cgroup = nil, ""
	t.mu.Unlock()
}

// record writes COMMAND's process into the marker and tells the watchdog,
// or arms the timer that starts it.
func (t *Term) record(ch *Command) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rec.cpid, t.rec.pgid = ch.cmd.Process.Pid, ch.pgid
	t.rec.cstart, _ = procStart(t.rec.cpid)
	t.rec.commandStarted = true
	t.write()
	switch {
	case t.wd != nil:
		t.wd.command(&t.rec)
	case t.wdTimer == nil:
		t.wdTimer = time.AfterFunc(watchdogDelay, t.startWatchdog)
	}
}

// startWatchdog starts the term's watchdog unless it runs or the term
// has ended, and tells it of COMMAND once COMMAND has started. A term that
// claims its name starts it before COMMAND (Start): the claim's copy is
// what keeps a newcomer in a lock directory made anew at the path from
// leading while anything of this term may still run, so it must outlive
// a leaderrun killed at any moment of the term, its first milliseconds
// too. Otherwise record's timer starts it; without a watchdog (it could
// not be started) that timer tries again.
func (t *Term) startWatchdog() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.wd != nil || t.ended {
		return
	}
	if t.pre != nil && t.token == "" && t.pre.begin(t) {
		t.wd = t.pre
	} else {
		t.pre.close()
		t.wd = startWatchdog(t)
	}
	t.pre = nil
	if t.rec.commandStarted {
		t.wd.command(&t.rec)
	}
}

// Expire ties the term to lead's deadline, for a backend whose terms end
// unless renewed (etcd's lease): the watchdog starts now, before COMMAND,
// learns how to end the term (token, the backend's: see RunWatchdog), and
// is told every new deadline, so that it stops COMMAND when this
// supervisor, stopped or starved, cannot. It fails with ErrNoWatchdog
// when the watchdog cannot be started: a COMMAND that could outlive its
// lease must not start. It does nothing for a term without a deadline.
func (t *Term) Expire(token string, lead *elect.Leadership, grace time.Duration) error {
	at, moved, ok := lead.Deadline()
	if t == nil || !ok {
		return nil
	}
	t.token = token
	t.mu.Lock()
	defer t.mu.Unlock()
	// A prepared watchdog cannot end a backend's term: this one can.
	t.pre.close()
	t.pre = nil
	if t.wd = startWatchdog(t); t.wd == nil {
		if strings.Contains(testFence, "nowatchdog") {
			return nil
		}
		return fmt.Errorf("%w (%s)", ErrNoWatchdog, lead.Name())
	}
	if t.token != "" {
		t.wd.say("endterm " + t.token)
	}
	t.wd.deadline(at, grace)
	go func() {
		for {
			select {
			case <-moved:
				at, moved, _ = lead.Deadline()
				t.tell(func(wd *watchdog) { wd.deadline(at, grace) })
			case <-lead.Done():
				t.tell(func(wd *watchdog) { wd.say("stopping") })
				return
			}
		}
	}()
	return nil
}

// tell gives the watchdog a message, unless the term has ended.
func (t *Term) tell(say func(*watchdog)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.ended {
		say(t.wd)
	}
}

// End removes the mark once COMMAND has been stopped, and tells the
// watchdog the term ended cleanly. If the cgroup cannot be emptied, the
// marker stays for the next holder to fence.
func (t *Term) End() {
	if t == nil {
		return
	}
	defer t.d.Close()
	t.mu.Lock()
	t.ended = true
	if t.wdTimer != nil {
		t.wdTimer.Stop()
	}
	t.pre.close()
	t.pre = nil
	t.mu.Unlock()
	t.f.Close()
	if t.cg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), fenceBudget)
		ok := t.cg.remove(ctx)
		cancel()
		if !ok {
			t.wd.close()
			return
		}
	}
	t.d.Remove(t.file)
	t.wd.close()
}

// RunWatchdog runs this process as a term's watchdog that can end its
// term as te says, if it is one (ok), and returns its exit status. A term
// whose Expire was given a token has such a watchdog: call RunWatchdog
// first thing in main with the backend's TermEnd; the other watchdogs run
// as the program starts, before main. There are watchdogs on Linux only.
func RunWatchdog(te TermEnd) (code int, ok bool) { return runWatchdogRole(te) }

// OutliveHolder is for a waiter in line, over a backend whose terms
// outlive a holder that died until they expire (etcd's lease), and that
// can end one at once: when pid, the holder of name, is a supervisor of
// the lock directory dir (its term marker is there), it sleeps on pid's
// pidfd; when that supervisor dies without ending its term (its marker is
// still there), it fences the term as the next holder would, calls end to
// end the term in the backend and, once that has succeeded, removes the
// marker (killed in between, it leaves the marker for the other waiters
// here). It returns when ctx ends (another holder, or this waiter's turn)
// or once that is done. Not on Linux, it
// returns at once: without pidfds and the fence there is nothing a waiter
// could do safely, and a dead holder's term expires with its lease.
func OutliveHolder(ctx context.Context, dir, name string, pid int, end func(context.Context) error) {
	outliveHolder(ctx, dir, name, pid, end)
}

// PidsLimit is the error for a pids cgroup (systemd's TasksMax=, a
// container's pids limit) too close to its limit for a supervisor to run:
// where the Go runtime cannot create a thread it needs it aborts with a
// dump of every goroutine (exit 2), which no code can catch. So the limit
// is checked first (cmd: "leaderrun: " and the error, exit 71, as for a
// fork of COMMAND refused with EAGAIN). Nil when there is room, or no
// limit can be read; always nil but on Linux.
func PidsLimit() error { return pidsLimit() }
