package elect

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/leaderrun/leaderrun/oslock"
)

// How a request waits: on the beacon of the ticket ahead of it (and the
// one ahead of that), on the holders the kernel names, or, when nothing
// can be slept on, by a bounded poll.

// waitBehind sleeps until the ticket b ahead of us goes, unless its owner
// is already dead (then it is removed and the caller looks again). When b
// is itself waiting, we also watch what b waits on; when b is at the head
// of the line, we check after StallBound that it took the lock, and pass
// it if it is stopped.
func (a *acquirer) waitBehind(ctx context.Context, ahead []entry, b entry) error {
	bf, rb, rerr, again, err := a.lookAt(b)
	if again || err != nil {
		return err
	}
	if a.req.IfAvailable {
		return ErrBusy
	}
	if bf == nil {
		// A live ticket without a beacon: not made by this version.
		return a.pollWait(ctx, "the ticket ahead has no beacon to sleep on (made by an older leaderrun)")
	}
	w := newWaitSet(ctx)
	defer w.close()
	w.hangup(bf)
	w.message(a.tk.inbox) // a nudge: the line ahead is stopped, look again
	bw := a.watchAhead(w, ahead, b, rb, rerr)
	if bw.again {
		return nil
	}
	return a.sleepBehind(w, b, bw)
}

// behind is how a request sleeps behind the ticket b it waits on.
type behind struct {
	stall       time.Duration // when to check on b; 0: only on events
	holderWatch bool          // b is granted and StealStopped is set
	head        bool          // b waits on nobody: it is at the head of the line
	bahead      []entry       // the tickets ahead of b
	again       bool          // look at the queue again at once
	aheadB      *os.File      // the beacon of the one b waits on, watched too
	bExclusive  bool          // b is an ordinary exclusive request
}

// lookAt opens b's beacon and reads b's record. again says that b was
// found dead (what it left is removed) and the caller should look at the
// queue again. A record that cannot be read (not written by leaderrun, or
// not put back yet) is returned as rerr: only the beacon is waited on.
func (a *acquirer) lookAt(b entry) (bf *os.File, rb record, rerr error, again bool, err error) {
	bf, err = a.beacon(b.name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, record{}, nil, false, err
	}
	if bf != nil && oslock.HungUp(bf) {
		probe(a.q, b) // its owner is gone: remove what it left
		return nil, record{}, nil, true, nil
	}
	if bf == nil || !a.moved(b) {
		alive, err := probe(a.q, b)
		if err != nil || !alive {
			return nil, record{}, nil, true, err
		}
	}
	rb, rerr = readRecord(a.q, b.name)
	if rerr == nil {
		a.pids[b.name] = rb.PID
	}
	return bf, rb, rerr, false, nil
}

// watchAhead adds to w what else we wait on behind b, and returns how
// long to sleep before looking at b (0: until an event). When b waits
// too, we also watch what b waits on; when nothing can be watched for it
// (b is at the head of the line, or we cannot tell), or b is stopped and
// so cannot take its turn, the stall timer checks on b. With
// StealStopped, a granted b is looked at periodically (holderWatch) in
// case it stops. again says that what b waits on was found dead (it is
// removed): the caller looks at the queue again.
func (a *acquirer) watchAhead(w *waitSet, ahead []entry, b entry, rb record, rerr error) behind {
	var bw behind
	if rerr != nil || rb.Epoch == 0 {
		bw.stall, bw.head = StallBound, true
	}
	bw.holderWatch = rerr == nil && rb.Epoch != 0 && a.req.StealStopped > 0
	if bw.holderWatch {
		bw.stall = a.req.StealStopped / 4 // see Request.StealStopped
	}
	if rerr != nil || rb.Epoch != 0 {
		return bw
	}
	bw.bahead = ahead[:len(ahead)-1]
	for i := len(ahead) - 1; i >= 0; i-- {
		if ahead[i].name == b.name {
			bw.bahead = ahead[:i]
			break
		}
	}
	if bb, ok := a.blockerOf(bw.bahead, rb.Mode, b.steal, true); ok {
		bw.head = false
		if f, err := a.beacon(bb.name); err == nil {
			// A beacon opened after its owner died hangs up at once:
			// sleeping on it would wake us for ever. Its owner is gone
			// (or renewing it): remove what it left and look again.
			if oslock.HungUp(f) {
				probe(a.q, bb)
				bw.again = true
				return bw
			}
			w.hangup(f)
			bw.stall = 0
			bw.aheadB, bw.bExclusive = f, rb.Mode == Exclusive && !b.steal
		}
	}
	if a.stopped(rb.PID) {
		// b cannot take its turn while stopped: check on it after
		// StallBound, and pass it (and the stopped ones ahead of it)
		// if it is still stopped then.
		bw.stall = StallBound
	}
	return bw
}

// stopped reports whether pid is a stopped process.
func (a *acquirer) stopped(pid int) bool {
	return pid > 0 && oslock.StateOf(pid) == oslock.ProcStopped
}

// sleepBehind sleeps on w until something fired, checking on b each time
// the stall timer runs out.
func (a *acquirer) sleepBehind(w *waitSet, b entry, bw behind) error {
	stall := bw.stall
	for {
		fired, err := w.wait(stall)
		if err != nil {
			return err
		}
		if fired {
			if a.aheadGone(w, &bw) {
				stall = bw.stall
				continue
			}
			return nil
		}
		if bw.holderWatch {
			if err := a.stealStopped([]entry{b}); err != nil {
				return err
			}
			continue
		}
		// The stall timer: b was at the head of the line with nothing
		// ahead of it and has not been granted yet, or b was stopped.
		var again time.Duration
		if again, err = a.checkStall(b, bw, w, stall); err != nil || again == 0 {
			return err
		}
		stall = again
	}
}

// aheadGone is the usual wake-up of the one behind the next in line: the
// holder ahead of b, the head of the line, hung up, and b is the head
// now. Nothing else changed for us, so instead of looking at the queue
// again (as many system calls as a grant) we sleep on: on b's beacon, with
// the stall timer that checks that b takes its turn, as watchAhead would
// arm for a b at the head of the line. It applies only in the plain case:
// exclusive requests and no steal that may be queued (a stepped-back
// grant renews its beacon when a steal comes).
func (a *acquirer) aheadGone(w *waitSet, bw *behind) bool {
	if bw.aheadB == nil || w.last != bw.aheadB || len(bw.bahead) != 1 || !bw.bExclusive ||
		a.req.Steal || a.req.Mode != Exclusive || stealsMaybe(a.q) || !w.drop(bw.aheadB) {
		return false
	}
	bw.aheadB, bw.bahead = nil, nil
	bw.head, bw.stall = true, StallBound
	return true
}

// pass lets this request go ahead of b, found stopped, and of the
// waiters just ahead of b that are stopped too: a run of stopped waiters
// is passed at once, not one StallBound each. They keep their places
// ahead of those who joined after them (see blockerOf).
func (a *acquirer) pass(b entry, bahead []entry) {
	a.passed[b.name] = true
	for i := len(bahead) - 1; i >= 0; i-- {
		e := bahead[i]
		r, err := readRecord(a.q, e.name)
		if err != nil || r.Epoch != 0 || !a.stopped(r.PID) {
			return
		}
		a.pids[e.name] = r.PID
		a.passed[e.name] = true
	}
}

// checkStall looks at b after it left the lock untaken for a while (head:
// b is at the head of the line) or stayed stopped for a while. It returns the time to look again, or 0 to
// re-evaluate the queue (b was granted, is gone, or is passed).
func (a *acquirer) checkStall(b entry, bw behind, w *waitSet, last time.Duration) (time.Duration, error) {
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
		a.pass(b, bw.bahead)
		return 0, nil
	case oslock.ProcGone:
		return 0, nil
	}
	if !bw.head {
		// b waits behind someone and runs again: what we watch (its
		// beacon and its blocker's) tells when to look again.
		return -1, nil
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
	granted, owners, closeBeacons := a.watchGranted(w, queue)
	defer closeBeacons()
	holders := a.lockHolders(owners)
	for _, pid := range holders {
		w.gone(pid)
	}
	if w.empty() || a.requeued(queue, holders) {
		return a.pollWait(ctx, "the lock is held by a process that /proc/locks does not show (another pid namespace, or no /proc)")
	}
	if a.poll.Polling() {
		a.poll.Reset()
		a.tk.rec.Polling = false // something to sleep on again
		a.tk.write()
	}
	timer, watchStopped := a.holderTimer(len(granted) > 0)
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

// watchGranted adds to w the beacons of the granted tickets in queue (but
// ours): their holders' hang-ups wake the wait. It returns those tickets,
// their owners' pids, and what closes the beacons.
func (a *acquirer) watchGranted(w *waitSet, queue []entry) (granted []entry, owners map[int]bool, closeAll func()) {
	owners = map[int]bool{}
	var beacons []*os.File
	for _, e := range queue {
		if e.name == a.tk.e.name {
			continue
		}
		r, err := readRecord(a.q, e.name)
		if err != nil || r.Epoch == 0 {
			continue
		}
		if f, err := a.q.OpenBeacon(e.name+beaconSuffix, false); err == nil {
			beacons = append(beacons, f)
			w.hangup(f)
			owners[r.PID] = true
			a.pids[e.name] = r.PID
			granted = append(granted, e)
		}
	}
	return granted, owners, func() {
		for _, f := range beacons {
			f.Close()
		}
	}
}

// holderTimer is how long waitLock may sleep on events alone (0: no
// limit): until KillAfter's SIGKILL of deposed holders is due, or a
// quarter of StealStopped while there are granted holders to check on
// (watchStopped).
func (a *acquirer) holderTimer(anyGranted bool) (timer time.Duration, watchStopped bool) {
	if !a.killAt.IsZero() && !a.killed && len(a.deposed) > 0 {
		timer = max(time.Until(a.killAt), time.Nanosecond)
	}
	watchStopped = a.req.StealStopped > 0 && anyGranted && (timer == 0 || a.req.StealStopped/4 < timer)
	if watchStopped {
		timer = a.req.StealStopped / 4
	}
	return timer, watchStopped
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
		if err := killable(pid, fmt.Sprintf("has been stopped for %v", now.Sub(since).Round(time.Millisecond)), "be continued"); err != nil {
			return err
		}
		if r, err := readRecord(a.q, e.name); err == nil && r.Epoch != 0 {
			a.q.SignalBeacon(e.name+inboxSuffix, stealNotice(r.Epoch, a.tk.e.name))
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
	if len(table[id]) == 0 {
		// /proc/locks is read a page at a time and can skip an entry
		// when other locks go meanwhile (see Query): look again.
		if table, err = oslock.LockTable(); err != nil {
			return nil
		}
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
func (a *acquirer) pollWait(ctx context.Context, why string) error {
	if !a.poll.Polling() {
		if !a.tk.rec.Polling && a.req.OnPolling != nil {
			a.req.OnPolling(why)
		}
		a.tk.rec.Polling = true
		a.tk.write()
	}
	return a.poll.Wait(ctx)
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
