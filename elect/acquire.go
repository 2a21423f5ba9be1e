package elect

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/leaderrun/leaderrun/oslock"
)

// Acquire asks for the lock name as req says and returns the leadership
// once it is granted. Requests are granted strictly in the order they
// joined the queue (steals first), following the Web Locks rule for modes;
// a waiter stopped at the head of the line (SIGSTOP, a debugger) is passed
// after StallBound and keeps its place. When ctx ends first, the request
// leaves the queue and Acquire returns the context's error (or cause);
// nothing of the request is left behind. With req.IfAvailable it never
// waits and returns ErrBusy instead. After [Locker.Close] it returns
// ErrClosed.
func (l *Locker) Acquire(ctx context.Context, name string, req Request) (*Leadership, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if err := req.validate(); err != nil {
		return nil, err
	}
	if l.alone {
		return l.actAlone(name, req)
	}
	if req.Command == nil {
		req.Command = os.Args
	}
	ctx, done, err := l.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	a := &acquirer{l: l, name: name, req: req, passed: map[string]bool{}, pids: map[string]int{}}
	lead, err := a.run(ctx)
	if err != nil {
		a.cleanup()
		return nil, l.closedErr(ctx, a.abandoned(err))
	}
	return lead, nil
}

// StallBound is how long a waiter at the head of the line may leave a free
// lock untaken before the one behind it checks on it: if it is stopped, it
// is passed. A running one is never passed.
const StallBound = 20 * time.Millisecond

// acquirer is one request on its way to the lock.
type acquirer struct {
	l    *Locker
	name string
	req  Request

	dir   *oslock.Dir // the lock directory as it was when the request began
	q     *oslock.Dir
	tk    *ticket
	lockF *os.File

	killAt       time.Time // with Steal and KillAfter
	killed       bool
	deposed      map[string]bool      // their tickets
	modes        map[string]bool      // ticket name -> exclusive, as read (shared requests)
	pids         map[string]int       // ticket name -> owner's pid, as read
	passed       map[string]bool      // stopped waiters passed at the head of the line
	stoppedSince map[string]time.Time // holders seen stopped (StealStopped)
	known        []entry              // the tickets ahead of ours, as last seen
	drain        []entry              // the queue, while holders of a replaced lock file are left
	beacons      map[string]*os.File  // beacons of tickets we waited on, kept open
	poll         oslock.Poller        // the fallback poll's back-off
}

func (a *acquirer) cleanup() {
	a.closeBeacons()
	if a.lockF != nil {
		oslock.Drop(a.lockF)
	}
	if a.tk != nil {
		a.tk.drop()
	}
	if a.req.Steal && a.q != nil {
		unmarkSteal(a.dir, a.name, a.q)
	}
	a.q.Close()
}

// abandoned marks a steal that gave up after it had deposed the holders.
func (a *acquirer) abandoned(err error) error {
	if len(a.deposed) > 0 && !errors.Is(err, ErrBusy) {
		return fmt.Errorf("%w: %w", ErrStealAbandoned, err)
	}
	return err
}

func (a *acquirer) run(ctx context.Context) (*Leadership, error) {
	var err error
	if a.dir, err = a.l.current(); err != nil {
		return nil, err
	}
	if err := a.openQueue(); err != nil {
		return nil, err
	}
	// The state lock is held for microseconds by whoever has it; a
	// cancel while waiting for it leaves nothing behind.
	// The ticket is drawn and published under the state file's lock, so
	// that every ticket with a lower number is linked by the time ours is:
	// the listing below then shows all that can ever be ahead of us but
	// steals (see aheadNow). A state file removed or truncated under a
	// live queue must not restart the counter: a newcomer would jump the
	// line, or take a number that a waiter holds; its count continues
	// after the queue's.
	if err := a.join(ctx, record{PID: os.Getpid(), Mode: a.req.Mode, Since: time.Now(), Command: a.req.Command, Steal: a.req.Steal, Labels: a.req.Labels}); err != nil {
		return nil, err
	}
	if a.req.Steal && a.req.KillAfter > 0 {
		a.killAt = time.Now().Add(a.req.KillAfter)
	}
	for {
		lead, err := a.step(ctx)
		if lead != nil || err != nil {
			return lead, err
		}
	}
}

// join draws a ticket number and publishes the ticket with rec. The
// ticket's files are made first; under the state file's lock it only
// draws the number and links them (see draft).
func (a *acquirer) join(ctx context.Context, rec record) error {
	p, err := prepare(a.q, rec)
	if err != nil {
		return err
	}
	defer p.discard()
	// The number is written back before the ticket is published, so a
	// joiner killed half-way never leaves a name that the next would take.
	_, err = withState(ctx, a.dir, a.name, func(s *state) error {
		if s.seq == 0 {
			// Recounted: numbers below the head of the line may be
			// handed out again, so its hint goes (see head.go).
			s.seq = lastTicket(a.q)
			a.voidHead()
		}
		s.seq++
		return nil
	}, func(s state) error {
		e := entry{name: ticketName(s.seq, a.req.Steal), seq: s.seq, steal: a.req.Steal}
		mark := func() error {
			if a.req.Steal {
				return markSteal(a.q)
			}
			return nil
		}
		err := mark()
		if err == nil {
			a.tk, err = p.link(e)
		}
		if errors.Is(err, fs.ErrNotExist) {
			// The queue directory was removed since the files were
			// made in it: make it again, and the ticket in it.
			if err = a.openQueue(); err == nil {
				if err = mark(); err == nil {
					a.tk, err = publish(a.q, e, rec)
				}
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	a.takePlace()
	return nil
}

// followAhead waits until the waiters we know to be ahead of us in a
// removed queue have left it (they rejoin before us, in their order), but
// not for a stopped one: their beacons, kept open, hang up when they go.
// Only this rare path has a timer, to look again at who is stopped.
func (a *acquirer) followAhead(ctx context.Context) error {
	for {
		w := newWaitSet(ctx)
		for n, f := range a.beacons {
			e, ok := parseTicket(n)
			if !ok || !before(e, a.tk.e) || oslock.HungUp(f) || a.stopped(a.pids[n]) {
				continue
			}
			w.hangup(f)
		}
		if w.empty() {
			w.close()
			return nil
		}
		_, err := w.wait(StallBound)
		w.close()
		if err != nil {
			return err
		}
	}
}

// rejoin moves the request to the lock directory d now at the Locker's
// path, the one it waited in having been removed, moved or replaced: it
// leaves the old queue (waking the one behind it there, which follows in
// turn, so the old line keeps its order) and joins d's queue at its end.
// Holders of the old directory still exclude it through their claims (see
// claim.go).
func (a *acquirer) rejoin(ctx context.Context, d *oslock.Dir) error {
	rec := a.tk.rec
	rec.Epoch, rec.Granted, rec.Deposed, rec.Polling = 0, time.Time{}, false, false
	if err := a.followAhead(ctx); err != nil {
		return err
	}
	a.closeBeacons()
	if a.lockF != nil {
		oslock.Drop(a.lockF)
		a.lockF = nil
	}
	a.known, a.drain = nil, nil
	clear(a.passed)
	clear(a.pids)
	a.modes = nil
	// The old ticket goes only once the new one is in line: the one
	// behind us, woken by its going, then joins behind us.
	old := a.tk
	defer old.drop()
	a.tk = nil
	a.dir = d
	if err := a.openQueue(); err != nil {
		return err
	}
	return a.join(ctx, rec)
}

func (a *acquirer) openQueue() error {
	q, err := a.dir.Sub(a.name+queueSuffix, true, oslock.DirOptions{GroupShared: a.l.group})
	if err != nil {
		return err
	}
	a.q.Close()
	a.q = q
	return nil
}

// step makes one attempt. It returns (nil, nil) to be called again after
// whatever it slept on has happened.
func (a *acquirer) step(ctx context.Context) (*Leadership, error) {
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	if d, err := a.l.current(); err != nil {
		return nil, err
	} else if d != a.dir {
		return nil, a.rejoin(ctx, d)
	}
	if err := a.keepTicket(); err != nil {
		return nil, err
	}
	ahead, err := a.aheadNow()
	if err != nil {
		return nil, err
	}
	if b, ok := a.blockerOf(ahead, a.req.Mode, a.req.Steal, true); ok {
		return nil, a.waitBehind(ctx, ahead, b)
	}
	var queue []entry
	if a.req.Steal {
		if queue, err = listQueue(a.q); err != nil {
			return nil, err
		}
		a.depose(queue)
	}
	if err := a.openLock(); err != nil {
		return nil, err
	}
	ok, err := oslock.TryLock(a.lockF, a.req.Mode == Exclusive)
	if err != nil {
		return nil, fmt.Errorf("%w (lock directory %s)", err, a.l.path)
	}
	if ok {
		lead, err := a.grant(ctx, headOf(a.tk.e, ahead))
		if lead == nil && err == nil && a.drain != nil {
			return nil, a.waitLock(ctx, a.drain)
		}
		return lead, err
	}
	if a.req.IfAvailable {
		return nil, ErrBusy
	}
	if queue == nil {
		if queue, err = listQueue(a.q); err != nil {
			return nil, err
		}
	}
	return nil, a.waitLock(ctx, queue)
}

// openLock opens <name>.lock, or opens it anew when the file at that path
// is no longer the one we have (removed or replaced).
func (a *acquirer) openLock() error {
	if a.lockF != nil {
		if a.lockCurrent() {
			return nil
		}
		oslock.Drop(a.lockF)
		a.lockF = nil
	}
	f, err := a.dir.OpenFile(a.name+lockSuffix, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	a.lockF = f
	return nil
}

// lockCurrent reports whether our lock file is still the one at the path.
func (a *acquirer) lockCurrent() bool {
	id, err := oslock.IDOf(a.lockF)
	if err != nil {
		return false
	}
	cur, _, err := a.dir.Lstat(a.name + lockSuffix)
	return err == nil && cur == id
}

// blockerOf is the ticket that a request of mode (a steal if steal) with
// the tickets ahead of it waits on: for a steal the nearest steal ahead,
// for an exclusive request the nearest ticket ahead, for a shared one the
// nearest exclusive ahead. Waiting on one ticket only means that one
// release wakes one process. With skip, waiters passed as stopped are not
// counted while they stay stopped.
func (a *acquirer) blockerOf(ahead []entry, mode Mode, steal, skip bool) (entry, bool) {
	for i := len(ahead) - 1; i >= 0; i-- {
		e := ahead[i]
		if skip && a.passed[e.name] {
			if oslock.StateOf(a.pids[e.name]) == oslock.ProcStopped {
				continue
			}
			delete(a.passed, e.name) // it runs again: it has its place back
		}
		switch {
		case steal:
			if e.steal {
				return e, true
			}
		case mode == Exclusive || e.steal || a.exclusive(e):
			return e, true
		}
	}
	return entry{}, false
}

// exclusive reports whether the ticket e asks for an exclusive lock.
// Tickets that cannot be read count as exclusive: waiting is the safe side.
// A ticket's mode never changes, so each is read once per request, not at
// every wake-up of a shared waiter.
func (a *acquirer) exclusive(e entry) bool {
	if x, ok := a.modes[e.name]; ok {
		return x
	}
	r, err := readRecord(a.q, e.name)
	x := err != nil || r.Mode != Shared
	if err == nil {
		if a.modes == nil {
			a.modes = map[string]bool{}
		}
		a.modes[e.name] = x
		a.pids[e.name] = r.PID
	}
	return x
}

// grant turns a kernel lock into a leadership: it checks that the lock
// file is still the one at the path, draws the epoch, marks the ticket as
// granted, and then looks once more for a steal that came in meanwhile.
// Either the stealer sees our mark (and deposes us) or we see its ticket
// (and step back), since each writes before it reads. head is the head of
// the line as this request saw it (see head.go).
func (a *acquirer) grant(ctx context.Context, head uint64) (*Leadership, error) {
	if !a.lockCurrent() {
		oslock.Drop(a.lockF)
		a.lockF = nil
		return nil, nil // removed or replaced under us: take the one at the path
	}
	// A holder of a directory that was at this path before (removed,
	// moved, mounted over or unmounted since) may still work: wait until
	// its claim is gone, and (exclusive) take the claim in the same step,
	// so that of two such holders one waits for the other (see claim.go).
	claim, err := a.claim(ctx)
	if err != nil {
		return nil, err
	}
	if testAfterClaim != nil {
		testAfterClaim(a.name)
	}
	granted := false
	defer func() {
		if !granted {
			claim.Close()
		}
	}()
	var replaced bool
	st, err := updateState(ctx, a.dir, a.name, grantEpoch(a.lockF, head, &replaced))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	a.tk.rec.Epoch, a.tk.rec.Granted, a.tk.rec.Polling = st.epoch, now, false
	if err := a.tk.write(); err != nil {
		return nil, err
	}
	// The mark is written before aheadNow looks for the steal marker, and
	// a stealer makes the marker before it reads marks: either it sees
	// our mark or we list the queue and see its ticket.
	ahead, err := a.aheadNow()
	if err != nil {
		return nil, err
	}
	_, blocked := a.blockerOf(ahead, a.req.Mode, a.req.Steal, true)
	if !blocked && (replaced || a.drain != nil) {
		// The lock file was replaced since the last grant: holders of
		// the old one are not excluded by our kernel lock. Wait for
		// every conflicting granted ticket to go first.
		if a.drain, err = a.oldHolders(st.epoch); err != nil {
			return nil, err
		}
		blocked = a.drain != nil
	}
	if blocked || !a.tk.present() {
		return nil, a.stepBack()
	}
	if replaced {
		if err := raiseFloor(ctx, a.dir, a.name, a.lockF, st.epoch); err != nil {
			return nil, err
		}
	}
	h := &holding{q: a.q, tk: a.tk, lockF: a.lockF, l: a.l, dir: a.dir, name: a.name, claim: claim}
	lead, end := newLeadership(Term{Name: a.name, Dir: a.l.path, Mode: a.req.Mode, Epoch: st.epoch, Since: now, Release: h.release}, a.dir, h.claim.File())
	h.lead = lead
	if err := a.l.track(lead); err != nil {
		return nil, err
	}
	granted = true // the claim is the holding's now
	h.armPath(end)
	h.watch(end)
	if a.req.Steal {
		unmarkSteal(a.dir, a.name, a.q)
	}
	a.closeBeacons()
	a.q, a.tk, a.lockF = nil, nil, nil // now the holding's
	return lead, nil
}

// stepBack undoes a grant that must not stand (a steal came in, or our
// ticket went): the mark is taken back and the lock let go.
func (a *acquirer) stepBack() error {
	a.known = nil // look at the whole queue next time
	a.tk.rec.Epoch, a.tk.rec.Granted = 0, time.Time{}
	if a.tk.present() {
		a.tk.write()
	}
	oslock.Drop(a.lockF)
	a.lockF = nil
	// Waiters that saw our mark sleep on our beacon as a holder's: wake
	// them, or they would wait for a release that never comes.
	return a.tk.renewBeacon()
}
