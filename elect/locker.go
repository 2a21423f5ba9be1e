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
	dir   *oslock.Dir
	path  string
	group bool
	alone bool

	mu     sync.Mutex
	closed bool
	terms  map[*Leadership]struct{}
}

// Open checks the lock directory and returns a Locker for it.
func Open(cfg Config) (*Locker, error) {
	path, create := cfg.Dir, false
	if path == "" {
		path, create = DefaultDir(), true
	}
	d, err := oslock.OpenDir(path, oslock.DirOptions{Create: create, GroupShared: cfg.GroupShared, AllowUnsafeFS: cfg.AllowUnsafeFS})
	if err != nil {
		if cfg.ActAlone && errors.Is(err, ErrUnsupported) {
			return &Locker{path: path, alone: true, terms: map[*Leadership]struct{}{}}, nil
		}
		return nil, err
	}
	return &Locker{dir: d, path: d.Path(), group: cfg.GroupShared, terms: map[*Leadership]struct{}{}}, nil
}

// Dir is the lock directory's path.
func (l *Locker) Dir() string { return l.path }

// Alone reports whether the Locker degraded to acting alone (Config.ActAlone
// on an unsupported filesystem).
func (l *Locker) Alone() bool { return l.alone }

// Close releases every leadership granted by l and closes the directory. It
// is idempotent.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
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
	return errors.Join(errs...)
}

func (l *Locker) track(t *Leadership) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errClosed
	}
	l.terms[t] = struct{}{}
	return nil
}

func (l *Locker) untrack(t *Leadership) {
	l.mu.Lock()
	delete(l.terms, t)
	l.mu.Unlock()
}

var errClosed = errors.New("elect: locker is closed")

// Names lists the lock names that exist in the directory, sorted.
func (l *Locker) Names() ([]string, error) {
	if l.alone {
		return nil, nil
	}
	all, err := l.dir.Names()
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
