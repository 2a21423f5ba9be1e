package elect

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/oslock"
)

// holding is what a granted request keeps: its ticket and beacon, the
// kernel lock, and a goroutine that reads the inbox, where a stealer's
// notice arrives.
type holding struct {
	l     *Locker
	lead  *Leadership
	dir   *oslock.Dir
	name  string
	q     *oslock.Dir
	tk    *ticket
	lockF *os.File
	claim *oslock.Claim // see claim.go

	mu   sync.Mutex // guards tk.rec against the reader
	done chan struct{}

	watches  []*oslock.Watch // the lock file's name and the directory's
	unwatch  chan struct{}
	watched  chan struct{}
	arm      *time.Timer // arms the path watch (see armPath)
	released bool        // under mu: release has begun, arm nothing
}

// watch starts the goroutine that reads the inbox until it is closed.
func (h *holding) watch(end func(error)) {
	h.done = make(chan struct{})
	go func() {
		defer close(h.done)
		buf := make([]byte, 512)
		var pending []byte
		for {
			n, err := h.tk.inbox.Read(buf)
			if err != nil {
				return
			}
			pending = append(pending, buf[:n]...)
			for {
				line, rest, ok := bytes.Cut(pending, []byte{'\n'})
				if !ok {
					break
				}
				pending = rest
				if h.deposedBy(line) {
					end(ErrStolen)
				}
			}
			if len(pending) > 512 {
				pending = nil // not ours: nothing leaderrun writes is this long
			}
		}
	}()
}

// deposedBy reports whether line is a steal notice for this term, and
// marks the ticket so that Query shows the holder as deposed.
func (h *holding) deposedBy(line []byte) bool {
	s, ok := bytes.CutPrefix(line, []byte("S"))
	if !ok {
		return false
	}
	s, by, _ := bytes.Cut(s, []byte(" "))
	epoch, err := strconv.ParseUint(string(s), 10, 64)
	if err != nil || epoch != h.lead.Epoch() {
		return false // a notice for an earlier grant that stepped back
	}
	// A steal deposes only while its stealer still asks: one that died
	// or gave up before we read its notice (we were stopped, say) leaves
	// us leading. A notice naming no ticket is an older leaderrun's.
	if e, ok := parseTicket(string(by)); ok {
		if alive, err := probe(h.q, e); err == nil && !alive {
			return false
		}
	}
	h.mu.Lock()
	if !h.tk.rec.Deposed {
		h.tk.rec.Deposed = true
		h.tk.write()
	}
	h.mu.Unlock()
	return true
}

// PathWatchDelay is how long into a term the holder starts watching its
// lock file's path (see [ErrLockLost]): a lock file removed or replaced
// under a holder ends its term at most this long after the term began, or
// at once when that happens later. A term shorter than this (a chain of
// quick jobs) costs no inotify watch, no mount-table watch and no teardown
// of them; successors are protected meanwhile as always: they wait for
// every granted ticket and claim of an older lock file (see claim.go).
const PathWatchDelay = 10 * time.Millisecond

// armPath starts the path watch PathWatchDelay from now, unless the term
// is released first.
func (h *holding) armPath(end func(error)) {
	h.arm = time.AfterFunc(PathWatchDelay, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if !h.released {
			h.watchPath(end)
		}
	})
}

// addWatches watches the lock file's path, then its directory, as far as
// it can.
func (h *holding) addWatches(lockPath string) {
	if testBeforeWatch != nil {
		testBeforeWatch(lockPath)
	}
	for _, p := range []string{lockPath, h.l.path} {
		w, err := oslock.WatchPath(p)
		if err != nil {
			return
		}
		h.watches = append(h.watches, w)
	}
}

// testBeforeWatch, set by tests, runs between watchPath's first look at
// the path and its watch.
var testBeforeWatch func(lockPath string)

// watchPath ends the term with ErrLockLost as soon as the lock file at the
// Locker's path is no longer the one we hold (removed, replaced, its
// directory moved or removed, or a filesystem mounted over it or
// unmounted under it): from then on a newcomer would lock another
// file, and flock(1) on the path is no longer excluded. It uses the
// process's one inotify instance; where none can be had, the loss is
// noticed only by newcomers, which still wait for this holder's ticket.
// The beacon, ticket and lock descriptors are moved above the instance's,
// so that a dying holder's lock, ticket and beacon are let go, in that
// order, before the instance's slow teardown: the successor wakes at once.
// It runs under h.mu (which release takes before it closes them), as it
// may move those descriptors; the first look at the path is made before
// any event is waited for, so a loss before the watch was armed is seen.
func (h *holding) watchPath(end func(error)) {
	lockPath := filepath.Join(h.l.path, h.name+lockSuffix)
	// The identity of the file we hold is taken once: release closes
	// h.lockF while this watch may still be looking.
	id, err := oslock.IDOf(h.lockF)
	if err != nil {
		return
	}
	lost := func() bool {
		cur, _, err := oslock.LstatPath(lockPath)
		return err != nil || cur != id
	}
	if lost() {
		end(ErrLockLost) // before the watch was armed
		return
	}
	h.addWatches(lockPath)
	if len(h.watches) == 0 {
		// The path's watch fails once the file is gone: removed
		// between the first look and the watch, it is lost now.
		if lost() {
			end(ErrLockLost)
		}
		return
	}
	fs, _ := oslock.AboveWatches(h.tk.beacon, h.tk.f, h.lockF)
	h.tk.beacon, h.tk.f, h.lockF = fs[0], fs[1], fs[2]
	h.unwatch, h.watched = make(chan struct{}), make(chan struct{})
	var c1, c2 <-chan struct{}
	c1 = h.watches[0].C
	if len(h.watches) > 1 {
		c2 = h.watches[1].C
	}
	// A mount over the directory (or a lazy unmount of its filesystem)
	// sends no inotify event: the mount table's changes are watched too.
	c3, stopMounts, err := oslock.WatchMounts()
	if err != nil {
		stopMounts = func() {}
	}
	go func() {
		defer close(h.watched)
		defer stopMounts()
		for !lost() {
			select {
			case <-h.unwatch:
				return
			case <-c1:
			case <-c2:
			case <-c3:
			}
		}
		end(ErrLockLost)
	}()
}

// release gives the lock up: the kernel lock first, then the ticket's
// name, and then the beacon, so that the successor, woken by the beacon's
// hang-up, finds the lock free and the ticket gone.
func (h *holding) release() error {
	// The successor sleeps on our beacon: it is closed as soon as the
	// lock is free and the ticket gone, and the rest is put away after.
	// The path watch only reacts to the lock file, which a release leaves
	// in place; the inbox reader, if a steal notice comes in meanwhile,
	// finds the ticket closed and ends a term that is over anyway.
	// Once released is set (under mu), the path watch is not armed any
	// more and no descriptor is moved: the ones closed below are final.
	h.mu.Lock()
	h.released = true
	h.mu.Unlock()
	h.arm.Stop()
	h.claim.Close() // first: a newcomer elsewhere waits on it, not on the lock
	errs := []error{oslock.Drop(h.lockF)}
	h.mu.Lock()
	h.tk.unname()
	h.mu.Unlock()
	h.tk.beacon.Close()
	// The ticket file is closed, and the FIFOs' names go, after the
	// hang-up that wakes the successor: freeing the ticket's inode takes
	// the filesystem a while, and its name is gone already; a listing
	// skips the FIFOs, and their names are never used again.
	h.mu.Lock()
	oslock.Drop(h.tk.f)
	h.mu.Unlock()
	h.tk.unlinkFIFOs()
	nudgeAfter(h.q, h.tk.e.seq)
	if h.unwatch != nil {
		close(h.unwatch)
		<-h.watched
	}
	for _, w := range h.watches {
		w.Stop()
	}
	h.tk.inbox.Close() // ends the reader
	<-h.done
	errs = append(errs, h.q.Close())
	h.l.untrack(h.lead)
	return errors.Join(errs...)
}
