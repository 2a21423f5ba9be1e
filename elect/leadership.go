package elect

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/oslock"
)

// Leadership is one term of holding a lock: a value with a lifetime. Its
// Context ends when the term ends, whether the holder released it, it was
// stolen, or the Locker was closed. Release is idempotent.
//
// A Leadership is created by a backend with [NewLeadership]; the flock
// backend is [Locker].
type Leadership struct {
	name    string
	dir     string
	lockDir *oslock.Dir
	claim   *os.File
	mode    Mode
	epoch   uint64
	since   time.Time
	expiry  func() (time.Time, <-chan struct{})

	ctx    context.Context
	cancel context.CancelCauseFunc

	once       sync.Once
	release    func() error
	releaseErr error
}

// Term describes a new Leadership to [NewLeadership].
type Term struct {
	Name  string
	Dir   string // where the lock lives, for a backend that has one
	Mode  Mode
	Epoch uint64
	Since time.Time
	// Release gives the lock back. It is called at most once.
	Release func() error
	// Deadline is for a backend whose terms end unless renewed (etcd):
	// it returns the instant, as known now, by which the term ends at the
	// latest, and a channel closed when that instant moves. Nil for a
	// term that lasts until released (flock).
	Deadline func() (time.Time, <-chan struct{})
}

// NewLeadership is for backends: it returns a Leadership for t and a
// function that ends its context with a cause (such as ErrStolen) without
// releasing the lock; the holder still calls Release.
func NewLeadership(t Term) (*Leadership, func(cause error)) {
	return newLeadership(t, nil, nil)
}

// NewLeadershipIn is NewLeadership for a term held in the lock directory
// dir, already checked (oslock.OpenDir), as the flock backend's are: the
// bus serves its socket there (Leadership.OpenDir). It is for tests and
// tools that make a leadership by hand; the Leadership owns dir.
func NewLeadershipIn(t Term, dir *oslock.Dir) (*Leadership, func(cause error)) {
	return newLeadership(t, dir, nil)
}

// newLeadership is NewLeadership with the flock backend's own parts: the
// checked lock directory and the claim on the name outside it (Claim).
func newLeadership(t Term, lockDir *oslock.Dir, claim *os.File) (*Leadership, func(cause error)) {
	ctx, cancel := context.WithCancelCause(context.Background())
	l := &Leadership{
		name: t.Name, dir: t.Dir, lockDir: lockDir, claim: claim, mode: t.Mode, epoch: t.Epoch, since: t.Since,
		ctx: ctx, cancel: cancel, release: t.Release, expiry: t.Deadline,
	}
	return l, cancel
}

// Name is the lock's name.
func (l *Leadership) Name() string { return l.name }

// Claim returns the descriptor that keeps the name fenced outside the lock
// directory while this exclusive term's work may go on (the flock backend,
// on Linux; nil otherwise): a newcomer in a directory put at the path
// after this one was removed, moved or mounted over waits until every
// copy of it is closed. Release closes this process's copy; give a copy
// to a process that must keep the fence should this one die first (the
// leaderrun command's watchdog, until COMMAND is gone).
func (l *Leadership) Claim() *os.File { return l.claim }

// Dir is the lock directory.
func (l *Leadership) Dir() string { return l.dir }

// OpenDir returns a new handle on the lock directory this term was
// granted in: the very directory the Locker checked, not its path opened
// anew (a directory put in its place since is not followed). The caller
// closes it. A leadership of a backend without a directory returns
// ErrUnsupported.
func (l *Leadership) OpenDir() (*oslock.Dir, error) {
	if l.lockDir == nil {
		return nil, fmt.Errorf("%w: the leadership of %s has no lock directory (only the flock backend's has one)", ErrUnsupported, l.name)
	}
	return l.lockDir.Dup()
}

// Mode is how the lock is held.
func (l *Leadership) Mode() Mode { return l.mode }

// Deadline reports, for a term that ends unless renewed (etcd), the
// instant by which it ends at the latest as known now, and a channel that
// is closed when that instant moves (a renewal); call Deadline again then.
// ok is false for a term that lasts until it is released (flock). A
// process that may be paused past the deadline cannot act on it itself:
// see cmd's watchdog, and fence the resource by Epoch.
func (l *Leadership) Deadline() (t time.Time, changed <-chan struct{}, ok bool) {
	if l.expiry == nil {
		return time.Time{}, nil, false
	}
	t, changed = l.expiry()
	return t, changed, true
}

// Epoch is this term's fencing token: strictly greater than every epoch
// granted before for the same name and directory. Pass it to whatever the
// leader writes, and have that refuse writes with a lower epoch.
func (l *Leadership) Epoch() uint64 { return l.epoch }

// Since is when the term began.
func (l *Leadership) Since() time.Time { return l.since }

// Context ends when the term ends; context.Cause gives ErrStolen,
// ErrReleased, or the cause given by the backend.
func (l *Leadership) Context() context.Context { return l.ctx }

// Done is closed when the term ends.
func (l *Leadership) Done() <-chan struct{} { return l.ctx.Done() }

// Err is nil while the term lasts, then why it ended.
func (l *Leadership) Err() error {
	if l.ctx.Err() == nil {
		return nil
	}
	return context.Cause(l.ctx)
}

// Release ends the term and gives the lock to the next in line. It is
// idempotent: later calls return the first call's result. After a steal,
// Release is how the old holder lets the stealer in.
func (l *Leadership) Release() error {
	l.once.Do(func() {
		l.cancel(ErrReleased)
		if l.release != nil {
			l.releaseErr = l.release()
		}
	})
	return l.releaseErr
}
