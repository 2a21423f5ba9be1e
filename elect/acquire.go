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

// errKillTime wakes a stealer whose KillAfter has run out.
var errKillTime = errors.New("elect: steal grace period over")

// Acquire asks for the lock name as req says and returns the leadership
// once it is granted. Requests are granted strictly in the order they
// joined the queue (steals first), following the Web Locks rule for modes.
// When ctx ends first, the request leaves the queue and Acquire returns
// the context's error (or cause); nothing of the request is left behind.
// With req.IfAvailable it never waits and returns ErrBusy instead.
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
	a := &acquirer{l: l, name: name, req: req}
	lead, err := a.run(ctx)
	if err != nil {
		a.cleanup()
		return nil, err
	}
	return lead, nil
}

// acquirer is one request on its way to the lock.
type acquirer struct {
	l    *Locker
	name string
	req  Request

	q     *oslock.Dir
	w     *oslock.Watcher
	tk    *ticket
	lockF *os.File

	killAt  time.Time // with Steal and KillAfter
	killed  bool
	evicted []int           // pids of holders this stealer evicted
	modes   map[string]bool // ticket name -> exclusive, as read (shared requests)
}

func (a *acquirer) cleanup() {
	if a.lockF != nil {
		a.lockF.Close()
	}
	if a.tk != nil {
		a.tk.drop()
	}
	a.w.Close()
	a.q.Close()
}

func (a *acquirer) run(ctx context.Context) (*Leadership, error) {
	var err error
	if a.q, err = a.l.dir.Sub(a.name+queueSuffix, true, oslock.DirOptions{GroupShared: a.l.group}); err != nil {
		return nil, err
	}
	if a.w, err = oslock.NewWatcher(); err != nil {
		return nil, err
	}
	// The state lock is held for microseconds by whoever has it; a
	// cancel while waiting for it leaves nothing behind.
	st, err := updateState(ctx, a.l.dir, a.name, a.w, func(s *state) { s.seq++ })
	if err != nil {
		return nil, err
	}
	rec := record{PID: os.Getpid(), Mode: a.req.Mode, Since: time.Now(), Command: a.req.Command, Steal: a.req.Steal}
	if a.tk, err = publish(a.q, entry{name: ticketName(st.seq, a.req.Steal), seq: st.seq, steal: a.req.Steal}, rec); err != nil {
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

// step makes one attempt. It returns (nil, nil) to be called again after
// whatever it slept on has happened.
func (a *acquirer) step(ctx context.Context) (*Leadership, error) {
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	if !a.tk.present() {
		// Evicted by a stealer between our grant and our mark being
		// seen; take our place again under the same number.
		t, err := publish(a.q, a.tk.e, a.tk.rec)
		if err != nil {
			return nil, err
		}
		a.tk.f.Close()
		a.tk = t
	}
	queue, err := listQueue(a.q)
	if err != nil {
		return nil, err
	}
	if blocker, ok := a.blocker(queue); ok {
		if blocker.name == "" {
			return nil, nil // our ticket went missing: look again
		}
		return nil, a.waitFor(ctx, blocker)
	}
	if a.req.Steal {
		a.evict(queue)
	}
	if a.lockF == nil {
		file := a.name + lockSuffix
		if a.lockF, err = a.l.dir.OpenFile(file, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
			return nil, err
		}
	}
	// Try first; watch the lock file only when it is held by someone
	// outside the queue (flock(1), a holder whose term was stolen), and
	// try again once the watch is in place so no release is missed.
	for watched := false; ; watched = true {
		ok, err := oslock.TryLock(a.lockF, a.req.Mode == Exclusive)
		if err != nil {
			return nil, fmt.Errorf("%w (lock directory %s)", err, a.l.path)
		}
		if ok {
			return a.grant(ctx)
		}
		if a.req.IfAvailable {
			return nil, ErrBusy
		}
		if watched {
			return nil, a.sleep(ctx)
		}
		a.w.Reset()
		if err := a.w.Add(a.l.dir.ResolvedPath(a.name+lockSuffix), oslock.ClosedAny|oslock.Gone); err != nil {
			return nil, err
		}
	}
}

// blocker is the ticket this request waits on: for an exclusive request
// the one just ahead of it, for a shared one the nearest exclusive ahead.
// Waiting on one ticket only means that one release wakes one process.
//
// A listing without our own ticket (a stealer evicted it after our last
// look) blocks on nothing in particular: ok is true with a zero entry, and
// the caller looks again, which puts the ticket back first.
func (a *acquirer) blocker(queue []entry) (entry, bool) {
	var found entry
	var ok bool
	for _, e := range queue {
		if e.name == a.tk.e.name {
			return found, ok
		}
		if a.req.Mode == Exclusive || e.steal || a.exclusive(e) {
			found, ok = e, true
		}
	}
	return entry{}, true
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
	}
	return x
}

// waitFor sleeps until blocker closes or loses its name, unless its owner
// is already dead (then it is removed and the caller looks again).
func (a *acquirer) waitFor(ctx context.Context, blocker entry) error {
	a.w.Reset()
	if err := a.w.Add(a.q.ResolvedPath(blocker.name), oslock.Closed|oslock.Gone); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	alive, err := probe(a.q, blocker)
	if err != nil || !alive {
		return err
	}
	if a.req.IfAvailable {
		return ErrBusy
	}
	return a.sleep(ctx)
}

// sleep waits for the watcher, or for a stealer's kill time.
func (a *acquirer) sleep(ctx context.Context) error {
	// The grace period counts only once this stealer has evicted
	// someone: one that still waits behind an earlier stealer has nobody
	// to kill yet.
	if a.killAt.IsZero() || a.killed || len(a.evicted) == 0 {
		return a.w.Wait(ctx)
	}
	wctx, cancel := context.WithDeadlineCause(ctx, a.killAt, errKillTime)
	defer cancel()
	err := a.w.Wait(wctx)
	if errors.Is(err, errKillTime) && ctx.Err() == nil {
		a.killed = true
		a.killHolders()
		return nil
	}
	return err
}

// grant turns a kernel lock into a leadership: it draws the epoch, marks
// the ticket as granted, and then looks once more for a steal that came in
// meanwhile. Either the stealer sees our mark (and evicts us) or we see its
// ticket (and step back), since each writes before it reads.
func (a *acquirer) grant(ctx context.Context) (*Leadership, error) {
	st, err := updateState(ctx, a.l.dir, a.name, a.w, nextEpoch)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	a.tk.rec.Epoch, a.tk.rec.Granted = st.epoch, now
	if err := a.tk.write(); err != nil {
		return nil, err
	}
	queue, err := listQueue(a.q)
	if err != nil {
		return nil, err
	}
	if _, blocked := a.blocker(queue); blocked || !a.tk.present() {
		a.tk.rec.Epoch, a.tk.rec.Granted = 0, time.Time{}
		if a.tk.present() {
			a.tk.write()
		}
		a.lockF.Close()
		a.lockF = nil
		return nil, nil
	}
	h := &holding{q: a.q, tk: a.tk, lockF: a.lockF, l: a.l}
	lead, end := NewLeadership(Term{Name: a.name, Dir: a.l.path, Mode: a.req.Mode, Epoch: st.epoch, Since: now, Release: h.release})
	h.lead = lead
	if err := a.l.track(lead); err != nil {
		return nil, err
	}
	if err := h.watch(a.w, end); err != nil {
		a.l.untrack(lead)
		return nil, err
	}
	a.q, a.tk, a.lockF, a.w = nil, nil, nil, nil // now the holding's
	return lead, nil
}
