package elect

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/oslock"
)

// Config says where locks live. The zero value uses the private default
// directory.
type Config struct {
	// Dir is the lock directory. Default: DefaultDir(), created with mode
	// 0700 if missing. An explicit Dir must exist already.
	Dir string
	// GroupShared accepts a directory writable by its group, for
	// contenders of several users sharing one group. Default false.
	GroupShared bool
	// AllowUnsafeFS uses a network or FUSE filesystem anyway. Default
	// false: such a directory gives ErrUnsupported.
	AllowUnsafeFS bool
	// ActAlone degrades instead of failing where locking is unsupported:
	// every Acquire is granted at once, as if each process were alone.
	// Default false. Use it only where running twice is harmless.
	ActAlone bool
}

// Locker grants leadership of names in one lock directory, by kernel flock
// and a ticketed FIFO queue. It is safe for concurrent use; one Locker can
// hold many names. Close ends every leadership it granted.
type Locker struct {
	path  string
	group bool
	alone bool
	cfg   Config

	// closing ends every Acquire in flight when Close is called; active
	// counts them, so that Close closes the directory after the last.
	closing context.Context
	stop    context.CancelFunc
	active  sync.WaitGroup

	mu      sync.Mutex
	dir     *oslock.Dir   // the directory now at path
	retired []*oslock.Dir // earlier ones, replaced under us
	closed  bool
	terms   map[*Leadership]struct{}
}

// Open checks the lock directory and returns a Locker for it.
func Open(cfg Config) (*Locker, error) {
	l := &Locker{cfg: cfg, group: cfg.GroupShared, terms: map[*Leadership]struct{}{}}
	l.closing, l.stop = context.WithCancel(context.Background())
	d, err := l.openDir()
	if err != nil {
		if cfg.ActAlone && errors.Is(err, ErrUnsupported) {
			l.path, l.alone = l.dirPath(), true
			return l, nil
		}
		return nil, err
	}
	l.dir, l.path = d, d.Path()
	return l, nil
}

func (l *Locker) dirPath() string {
	if l.cfg.Dir != "" {
		return l.cfg.Dir
	}
	return DefaultDir()
}

func (l *Locker) openDir() (*oslock.Dir, error) {
	return oslock.OpenDir(l.dirPath(), oslock.DirOptions{Create: l.cfg.Dir == "", GroupShared: l.cfg.GroupShared, AllowUnsafeFS: l.cfg.AllowUnsafeFS})
}

// current returns the lock directory now at the Locker's path, checked
// anew when the one we have was removed or replaced (a logout empties
// /run/user/UID, a cleaner ages out /tmp, a user's rm -rf): every new
// request then joins the directory that others will find at the path.
// Holders keep the directory they were granted in; see Leadership.Context.
func (l *Locker) current() (*oslock.Dir, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if id, err := l.dir.ID(); err == nil {
		if cur, _, err := oslock.LstatPath(l.path); err == nil && cur == id {
			return l.dir, nil
		}
	}
	// Made anew if it is gone: the first process back makes it, private
	// (or refuses one that another user made in its place).
	d, err := oslock.OpenDir(l.dirPath(), oslock.DirOptions{Create: true, GroupShared: l.cfg.GroupShared, AllowUnsafeFS: l.cfg.AllowUnsafeFS})
	if err != nil {
		return nil, err
	}
	l.retired = append(l.retired, l.dir)
	l.dir = d
	return d, nil
}

// begin registers an Acquire; the returned context also ends when the
// Locker is closed.
func (l *Locker) begin(ctx context.Context) (context.Context, func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, nil, ErrClosed
	}
	l.active.Add(1)
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.closing, func() { cancel(ErrClosed) })
	return ctx, func() {
		stop()
		cancel(nil)
		l.active.Done()
	}, nil
}

// closedErr is ErrClosed for a request that Close ended.
func (l *Locker) closedErr(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), ErrClosed) {
		return ErrClosed
	}
	return err
}

// Dir is the lock directory's path.
func (l *Locker) Dir() string { return l.path }

// Alone reports whether the Locker degraded to acting alone (Config.ActAlone
// on an unsupported filesystem).
func (l *Locker) Alone() bool { return l.alone }

// Close ends every Acquire still waiting (they return ErrClosed), releases
// every leadership granted by l and closes the directory. Later calls of
// l's methods return ErrClosed. It is idempotent.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.stop()
	l.active.Wait()
	l.mu.Lock()
	terms := make([]*Leadership, 0, len(l.terms))
	for t := range l.terms {
		terms = append(terms, t)
	}
	l.mu.Unlock()
	var errs []error
	for _, t := range terms {
		errs = append(errs, t.Release())
	}
	errs = append(errs, l.dir.Close())
	for _, d := range l.retired {
		errs = append(errs, d.Close())
	}
	return errors.Join(errs...)
}

func (l *Locker) track(t *Leadership) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.terms[t] = struct{}{}
	return nil
}

func (l *Locker) untrack(t *Leadership) {
	l.mu.Lock()
	delete(l.terms, t)
	l.mu.Unlock()
}

// Names lists the lock names that exist in the directory, sorted.
func (l *Locker) Names() ([]string, error) {
	if l.alone {
		return nil, nil
	}
	d, err := l.current()
	if err != nil {
		return nil, err
	}
	all, err := d.Names()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range all {
		if base, ok := strings.CutSuffix(n, lockSuffix); ok && ValidateName(base) == nil {
			names = append(names, base)
		}
	}
	sort.Strings(names)
	return names, nil
}

// TryAcquire asks once for name in mode and never waits. It returns ok false
// and no error when the lock is held or others are queued: contention is
// not an error.
func (l *Locker) TryAcquire(ctx context.Context, name string, mode Mode) (lead *Leadership, ok bool, err error) {
	lead, err = l.Acquire(ctx, name, Request{Mode: mode, IfAvailable: true})
	if errors.Is(err, ErrBusy) {
		return nil, false, nil
	}
	return lead, err == nil, err
}

func (l *Locker) actAlone(name string, req Request) (*Leadership, error) {
	lead, _ := NewLeadership(Term{Name: name, Dir: l.path, Mode: req.Mode, Epoch: uint64(time.Now().UnixMicro()), Since: time.Now()})
	return lead, nil
}
