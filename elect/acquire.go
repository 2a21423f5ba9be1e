package elect

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
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
	evicted      []int                // pids of holders this stealer deposed
	deposed      map[string]bool      // their tickets
	modes        map[string]bool      // ticket name -> exclusive, as read (shared requests)
	pids         map[string]int       // ticket name -> owner's pid, as read
	passed       map[string]bool      // stopped waiters passed at the head of the line
	stoppedSince map[string]time.Time // holders seen stopped (StealStopped)
	known        []entry              // the tickets ahead of ours, as last seen
	drain        []entry              // the queue, while holders of a replaced lock file are left
	beacons      map[string]*os.File  // beacons of tickets we waited on, kept open
	poll         time.Duration        // back-off of the fallback poll, 0 when not polling
}

// closeBeacons closes the beacons kept open.
func (a *acquirer) closeBeacons() {
	for n, f := range a.beacons {
		f.Close()
		delete(a.beacons, n)
	}
}

// beacon returns the beacon of ticket name, opened once and kept: a ticket
// whose name goes but whose beacon has not hung up is still alive (being
// put back after its queue was removed), and keeps its place.
func (a *acquirer) beacon(name string) (*os.File, error) {
	if f := a.beacons[name]; f != nil {
		if !oslock.HungUp(f) {
			return f, nil
		}
		// Its owner let go of it, or put its ticket back with a new one.
		f.Close()
		delete(a.beacons, name)
	}
	f, err := a.q.OpenBeacon(name+beaconSuffix, false)
	if err != nil {
		return nil, err
	}
	if a.beacons == nil {
		a.beacons = map[string]*os.File{}
	}
	a.beacons[name] = f
	return f, nil
}

// stillAhead adds to ahead (in order) the tickets we saw ahead before
// whose names are gone but whose owners still hold their beacons; the
// beacons of tickets that are gone for good are closed.
func (a *acquirer) stillAhead(ahead []entry) []entry {
	for n, f := range a.beacons {
		if slices.ContainsFunc(ahead, func(e entry) bool { return e.name == n }) {
			continue
		}
		if oslock.HungUp(f) {
			f.Close()
			delete(a.beacons, n)
			continue
		}
		if e, ok := parseTicket(n); ok && before(e, a.tk.e) {
			ahead = append(ahead, e)
		}
	}
	slices.SortFunc(ahead, func(x, y entry) int {
		switch {
		case before(x, y):
			return -1
		case before(y, x):
			return 1
		}
		return 0
	})
	return ahead
}

func (a *acquirer) cleanup() {
	a.closeBeacons()
	if a.lockF != nil {
		a.lockF.Close()
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
	if len(a.evicted) > 0 && !errors.Is(err, ErrBusy) {
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
	rec := record{PID: os.Getpid(), Mode: a.req.Mode, Since: time.Now(), Command: a.req.Command, Steal: a.req.Steal}
	// The number is written back before the ticket is published, so a
	// joiner killed half-way never leaves a name that the next would take.
	_, err = withState(ctx, a.dir, a.name, func(s *state) error {
		if s.seq == 0 {
			s.seq = lastTicket(a.q)
		}
		s.seq++
		return nil
	}, func(s state) error {
		if a.req.Steal {
			if err := markSteal(a.q); err != nil {
				return err
			}
		}
		var err error
		if a.tk, err = publish(a.q, entry{name: ticketName(s.seq, a.req.Steal), seq: s.seq, steal: a.req.Steal}, rec); err != nil {
			return err
		}
		a.takePlace()
		return nil
	})
	if err != nil {
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
		lead, err := a.grant(ctx)
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

// aheadNow returns the tickets ahead of ours. Tickets ahead can only go
// (new ones join behind us: numbers are drawn and published under the
// state lock), except steals, which go first, and tickets put back after
// their queue was removed (kept by their beacons, see stillAhead): so
// unless a steal may be queued, the tickets seen at the last listing that
// are still there are the ones to wait on, and a handoff costs one lstat
// per ticket still ahead instead of a listing of the whole queue.
func (a *acquirer) aheadNow() ([]entry, error) {
	if a.known != nil && !a.req.Steal && !stealsMaybe(a.q) {
		// A ticket whose name is gone but whose beacon we hold alive is
		// being put back (its queue was removed): it stays known, and is
		// found again under its name once it is back.
		kept := a.known[:0]
		for _, e := range a.known {
			if _, _, err := a.q.Lstat(e.name); err == nil {
				kept = append(kept, e)
			} else if f := a.beacons[e.name]; f != nil && !oslock.HungUp(f) {
				kept = append(kept, e)
			}
		}
		a.known = kept
		return a.stillAhead(slices.Clone(kept)), nil
	}
	queue, err := listQueue(a.q)
	if err != nil {
		return nil, err
	}
	ahead := a.ahead(queue)
	if ahead != nil {
		a.known = slices.Clone(ahead)
		ahead = a.stillAhead(ahead)
	}
	return ahead, nil
}

// moved reports whether ticket b is one we know only by its beacon: its
// name is gone (its queue was removed) but its owner lives.
func (a *acquirer) moved(b entry) bool {
	_, _, err := a.q.Lstat(b.name)
	return err != nil && a.beacons[b.name] != nil
}

// takePlace notes, at once after our ticket is linked, which tickets are
// ahead of us and opens the beacons of the ones we will wait on first: a
// ticket whose queue is removed a moment later (a cleaner, an rm -rf) is
// then still known to be ahead while its owner puts it back.
func (a *acquirer) takePlace() {
	ahead, err := a.aheadNow()
	if err != nil {
		return
	}
	for i := 0; i < 2; i++ {
		b, ok := a.blockerOf(ahead, a.req.Mode, a.req.Steal, false)
		if !ok {
			return
		}
		a.beacon(b.name)
		for j := len(ahead) - 1; j >= 0; j-- {
			if ahead[j].name == b.name {
				ahead = ahead[:j]
				break
			}
		}
	}
}

// keepTicket puts our ticket back when its name or its whole queue
// directory was removed (by hand, or by a cleaner), under the same number,
// so that the request keeps its place.
func (a *acquirer) keepTicket() error {
	if a.tk.present() {
		return nil
	}
	if id, _, err := a.dir.Lstat(a.name + queueSuffix); err != nil || !a.sameDir(id) {
		if err := a.openQueue(); err != nil {
			return err
		}
	}
	// Our FIFOs may still be there when only the ticket went.
	for _, f := range []struct {
		suffix string
		f      *os.File
	}{{beaconSuffix, a.tk.beacon}, {inboxSuffix, a.tk.inbox}} {
		if id, err := oslock.IDOf(f.f); err == nil {
			if cur, _, err := a.q.Lstat(a.tk.e.name + f.suffix); err == nil && cur == id {
				a.q.Remove(a.tk.e.name + f.suffix)
			}
		}
	}
	t, err := publish(a.q, a.tk.e, a.tk.rec)
	if err != nil {
		return err
	}
	a.tk.f.Close()
	a.tk.beacon.Close()
	a.tk = t
	return nil
}

func (a *acquirer) sameDir(id oslock.FileID) bool {
	cur, err := a.q.ID()
	return err == nil && cur == id
}

// openLock opens <name>.lock, or opens it anew when the file at that path
// is no longer the one we have (removed or replaced).
func (a *acquirer) openLock() error {
	if a.lockF != nil {
		if a.lockCurrent() {
			return nil
		}
		a.lockF.Close()
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

// ahead returns the tickets before ours, nearest last. A listing without
// our ticket (removed since the last look) returns nil, and the caller
// looks again, which puts the ticket back first.
func (a *acquirer) ahead(queue []entry) []entry {
	for i, e := range queue {
		if e.name == a.tk.e.name {
			return queue[:i]
		}
	}
	return nil
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

// waitBehind sleeps until the ticket b ahead of us goes, unless its owner
// is already dead (then it is removed and the caller looks again). When b
// is itself waiting, we also watch what b waits on; when b is at the head
// of the line, we check after StallBound that it took the lock, and pass
// it if it is stopped.
func (a *acquirer) waitBehind(ctx context.Context, ahead []entry, b entry) error {
	bf, err := a.beacon(b.name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if bf != nil && oslock.HungUp(bf) {
		probe(a.q, b) // its owner is gone: remove what it left
		return nil
	}
	if bf == nil || !a.moved(b) {
		alive, err := probe(a.q, b)
		if err != nil || !alive {
			return err
		}
	}
	// A record that cannot be read (not written by leaderrun, or not put
	// back yet) leaves only the beacon to wait on.
	rb, rerr := readRecord(a.q, b.name)
	if rerr == nil {
		a.pids[b.name] = rb.PID
	}
	if a.req.IfAvailable {
		return ErrBusy
	}
	if bf == nil {
		// A live ticket without a beacon: not made by this version.
		return a.pollWait(ctx)
	}
	w := newWaitSet(ctx)
	defer w.close()
	w.hangup(bf)
	// When b waits too, we also watch what b waits on; when nothing can
	// be watched for it (b is at the head of the line, or we cannot tell),
	// the stall timer checks on b.
	stall := time.Duration(0)
	if rerr != nil || rb.Epoch == 0 {
		stall = StallBound
	}
	holderWatch := rerr == nil && rb.Epoch != 0 && a.req.StealStopped > 0
	if holderWatch {
		stall = a.req.StealStopped / 4 // see Request.StealStopped
	}
	if rerr == nil && rb.Epoch == 0 {
		bahead := ahead[:len(ahead)-1]
		for i := len(ahead) - 1; i >= 0; i-- {
			if ahead[i].name == b.name {
				bahead = ahead[:i]
				break
			}
		}
		if bb, ok := a.blockerOf(bahead, rb.Mode, b.steal, true); ok {
			if f, err := a.beacon(bb.name); err == nil {
				w.hangup(f)
				stall = 0
			}
		}
	}
	for {
		fired, err := w.wait(stall)
		if err != nil || fired {
			return err
		}
		if holderWatch {
			if err := a.stealStopped([]entry{b}); err != nil {
				return err
			}
			continue
		}
		// The stall timer: b was at the head of the line with nothing
		// ahead of it, and has not been granted yet.
		var again time.Duration
		if again, err = a.checkStall(b, w, stall); err != nil || again == 0 {
			return err
		}
		stall = again
	}
}

// checkStall looks at b, the head of the line, after it left the lock
// untaken for a while. It returns the time to look again, or 0 to
// re-evaluate the queue (b was granted, is gone, or is passed).
func (a *acquirer) checkStall(b entry, w *waitSet, last time.Duration) (time.Duration, error) {
	rb, err := readRecord(a.q, b.name)
	if errors.Is(err, fs.ErrNotExist) || err == nil && rb.Epoch != 0 {
		return 0, nil
	}
	pid := rb.PID
	if err != nil {
		pid = a.pids[b.name] // unreadable now: go by what we read before
	}
	state := oslock.ProcUnknown
	if pid > 0 {
		state = oslock.StateOf(pid)
	}
	switch state {
	case oslock.ProcStopped:
		a.passed[b.name] = true
		return 0, nil
	case oslock.ProcGone:
		return 0, nil
	}
	// b runs but has not taken the lock: something outside the queue
	// holds it (flock(1), a deposed holder), or b is slow. Sleep on the
	// kernel's holders where we can see them, else look again later.
	if err := a.openLock(); err != nil {
		return 0, err
	}
	if pids := a.lockHolders(nil); len(pids) > 0 {
		for _, pid := range pids {
			w.gone(pid)
		}
		return -1, nil // no timer: the holders' exit or b's going wakes us
	}
	return min(2*last, time.Second), nil
}

// waitLock sleeps while the lock is held by someone other than the queue's
// waiters: granted tickets (shared holders, a holder that a stopped waiter
// let in, deposed holders), processes outside the queue (flock(1)), or a
// predecessor that is dying (its descriptors are closed in no fixed order,
// so its beacon may hang up a moment before its lock is dropped; the
// kernel lists it as a holder until then).
func (a *acquirer) waitLock(ctx context.Context, queue []entry) error {
	w := newWaitSet(ctx)
	defer w.close()
	owners := map[int]bool{}
	var granted []entry
	for _, e := range queue {
		if e.name == a.tk.e.name {
			continue
		}
		r, err := readRecord(a.q, e.name)
		if err != nil || r.Epoch == 0 {
			continue
		}
		if f, err := a.q.OpenBeacon(e.name+beaconSuffix, false); err == nil {
			defer f.Close()
			w.hangup(f)
			owners[r.PID] = true
			a.pids[e.name] = r.PID
			granted = append(granted, e)
		}
	}
	holders := a.lockHolders(owners)
	for _, pid := range holders {
		w.gone(pid)
	}
	if w.empty() || a.requeued(queue, holders) {
		return a.pollWait(ctx)
	}
	a.poll = 0
	timer := time.Duration(0)
	if !a.killAt.IsZero() && !a.killed && len(a.evicted) > 0 {
		timer = max(time.Until(a.killAt), time.Nanosecond)
	}
	watchStopped := a.req.StealStopped > 0 && len(granted) > 0 && (timer == 0 || a.req.StealStopped/4 < timer)
	if watchStopped {
		timer = a.req.StealStopped / 4
	}
	fired, err := w.wait(timer)
	switch {
	case err != nil || fired || timer == 0:
		return err
	case watchStopped:
		return a.stealStopped(granted)
	}
	a.killed = true
	return a.killHolders()
}

// stealStopped is Request.StealStopped: it deposes and kills the holders
// (of the same user) seen stopped for StealStopped; it is checked every
// quarter of that while this request heads the line behind them.
func (a *acquirer) stealStopped(granted []entry) error {
	if a.stoppedSince == nil {
		a.stoppedSince = map[string]time.Time{}
	}
	now := time.Now()
	for _, e := range granted {
		pid := a.pids[e.name]
		if oslock.StateOf(pid) != oslock.ProcStopped {
			delete(a.stoppedSince, e.name)
			continue
		}
		since, ok := a.stoppedSince[e.name]
		if !ok {
			a.stoppedSince[e.name] = now
			continue
		}
		if now.Sub(since) < a.req.StealStopped {
			continue
		}
		if uid, me := oslock.UIDOf(pid), os.Geteuid(); uid >= 0 && uid != me && me != 0 {
			return fmt.Errorf("%w: holder pid %d of uid %d has been stopped for %v, and uid %d may not kill it; it must be continued, or uid %d or root must end it",
				ErrForeignHolder, pid, uid, now.Sub(since).Round(time.Millisecond), me, uid)
		}
		if r, err := readRecord(a.q, e.name); err == nil && r.Epoch != 0 {
			a.q.SignalBeacon(e.name+inboxSuffix, []byte("S"+strconv.FormatUint(r.Epoch, 10)+"\n"))
		}
		oslock.Kill(pid)
		delete(a.stoppedSince, e.name)
	}
	return nil
}

// requeued reports whether one of the lock's holders also waits in the
// queue: a holder whose granted ticket was removed by hand (rm -rf of the
// queue) and which asked again. Its exit would never come; it is polled.
func (a *acquirer) requeued(queue []entry, holders []int) bool {
	if len(holders) == 0 {
		return false
	}
	for _, e := range queue {
		if e.name == a.tk.e.name {
			continue
		}
		if r, err := readRecord(a.q, e.name); err == nil && slices.Contains(holders, r.PID) {
			return true
		}
	}
	return false
}

// lockHolders returns the processes that the kernel says hold our lock
// file, other than us and the pids in skip.
func (a *acquirer) lockHolders(skip map[int]bool) []int {
	if a.lockF == nil {
		return nil
	}
	id, err := oslock.IDOf(a.lockF)
	if err != nil {
		return nil
	}
	table, err := oslock.LockTable()
	if err != nil {
		return nil
	}
	var pids []int
	for _, h := range table[id] {
		if h.PID != os.Getpid() && h.PID > 0 && !skip[h.PID] {
			pids = append(pids, h.PID)
		}
	}
	return pids
}

// pollWait is the fallback when nothing can be slept on: the lock is held
// but neither a ticket nor /proc/locks says by whom (a sandbox that hides
// /proc/locks, a descriptor inherited by another process, or a platform
// without FIFO events). It sleeps 1ms, doubling to 100ms, and Query
// reports the request as polling.
func (a *acquirer) pollWait(ctx context.Context) error {
	if a.poll == 0 {
		a.poll = time.Millisecond
		a.tk.rec.Polling = true
		a.tk.write()
	} else {
		a.poll = min(2*a.poll, 100*time.Millisecond)
	}
	t := time.NewTimer(a.poll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// grant turns a kernel lock into a leadership: it checks that the lock
// file is still the one at the path, draws the epoch, marks the ticket as
// granted, and then looks once more for a steal that came in meanwhile.
// Either the stealer sees our mark (and deposes us) or we see its ticket
// (and step back), since each writes before it reads.
func (a *acquirer) grant(ctx context.Context) (*Leadership, error) {
	if !a.lockCurrent() {
		a.lockF.Close()
		a.lockF = nil
		return nil, nil // removed or replaced under us: take the one at the path
	}
	var replaced bool
	st, err := updateState(ctx, a.dir, a.name, grantEpoch(a.lockF, &replaced))
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
		a.known = nil // look at the whole queue next time
		a.tk.rec.Epoch, a.tk.rec.Granted = 0, time.Time{}
		if a.tk.present() {
			a.tk.write()
		}
		a.lockF.Close()
		a.lockF = nil
		// Waiters that saw our mark sleep on our beacon as a holder's:
		// wake them, or they would wait for a release that never comes.
		return nil, a.tk.renewBeacon()
	}
	if replaced {
		if err := raiseFloor(ctx, a.dir, a.name, a.lockF, st.epoch); err != nil {
			return nil, err
		}
	}
	h := &holding{q: a.q, tk: a.tk, lockF: a.lockF, l: a.l, dir: a.dir, name: a.name}
	lead, end := NewLeadership(Term{Name: a.name, Dir: a.l.path, Mode: a.req.Mode, Epoch: st.epoch, Since: now, Release: h.release})
	h.lead = lead
	if err := a.l.track(lead); err != nil {
		return nil, err
	}
	h.watch(end)
	h.watchPath(end)
	if a.req.Steal {
		unmarkSteal(a.dir, a.name, a.q)
	}
	a.closeBeacons()
	a.q, a.tk, a.lockF = nil, nil, nil // now the holding's
	return lead, nil
}

// oldHolders returns the queue when a live granted ticket other than ours
// conflicts with our mode (then the caller waits on the queue), else nil.
func (a *acquirer) oldHolders(epoch uint64) ([]entry, error) {
	queue, err := listQueue(a.q)
	if err != nil {
		return nil, err
	}
	for _, e := range queue {
		if e.name == a.tk.e.name {
			continue
		}
		r, err := readRecord(a.q, e.name)
		if err != nil || r.Epoch == 0 || r.Epoch == epoch || a.req.Mode == Shared && r.Mode == Shared {
			continue
		}
		if alive, err := probe(a.q, e); err == nil && alive {
			return queue, nil
		}
	}
	return nil, nil
}
