package cmd

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/leaderrun/leaderrun/oslock"
)

// treeWatch watches a lock directory and the directories in it (each
// name's queue) for status --watch, on the process's one inotify instance
// (oslock.WatchEntries): it costs the user no instance of its own, and
// links no fsnotify on Linux. Where no watch can be had (the user's
// instances are all taken), it looks every fallbackTick instead. It is
// used by one goroutine; only forward runs beside it.
type treeWatch struct {
	root    string
	changed chan struct{} // a value when a watched directory changed
	dirs    map[string]dirWatch
	blind   bool // a directory could not be watched: wait looks every fallbackTick
}

// A dirWatch is the watch of one directory and the end of its forward.
type dirWatch struct {
	w    *oslock.Watch
	stop chan struct{}
}

func (d dirWatch) end() {
	d.w.Stop()
	close(d.stop)
}

// fallbackTick is how often status --watch looks where it cannot watch.
const fallbackTick = 250 * time.Millisecond

func watchTree(root string) (*treeWatch, error) {
	w := &treeWatch{root: root, changed: make(chan struct{}, 1), dirs: map[string]dirWatch{}}
	w.rescan()
	return w, nil
}

// rescan watches every directory of the tree anew (a queue directory is
// made with a name's first ticket, and may have been made anew at the
// same path since the last look, where the old watch sees nothing; one
// that could not be watched before is tried again) and forgets those that
// are gone. A directory's new watch is made before its old one ends, so
// that no event falls between them (the kernel's watch of an inode is
// shared by both).
func (w *treeWatch) rescan() {
	w.blind = false // until a directory cannot be watched (again)
	dirs := map[string]dirWatch{}
	add := func(dir string) {
		ow, err := oslock.WatchEntries(dir, true)
		if err != nil {
			if _, serr := os.Stat(dir); serr == nil {
				w.blind = true // it exists, and cannot be watched
			}
			return
		}
		dw := dirWatch{ow, make(chan struct{})}
		dirs[dir] = dw
		go w.forward(dw)
	}
	add(w.root)
	entries, _ := os.ReadDir(w.root)
	for _, e := range entries {
		if e.IsDir() {
			add(filepath.Join(w.root, e.Name()))
		}
	}
	for _, dw := range w.dirs {
		dw.end()
	}
	w.dirs = dirs
}

// forward passes a directory's events on to w.changed, until its watch
// ends.
func (w *treeWatch) forward(dw dirWatch) {
	for {
		select {
		case <-dw.w.C:
			select {
			case w.changed <- struct{}{}:
			default:
			}
		case <-dw.stop:
			return
		}
	}
}

// wait waits for a change in the tree, or tick (or, blind, the fallback
// tick); false when ctx ends. A change is a burst of events (a grant
// writes, renames and removes several entries): it returns once the burst
// is over, so that one snapshot follows it. The tree is watched anew
// after a change, which is how a directory made in it, or made anew,
// comes to be watched (its making is an event of the root), and after
// the fallback tick, which tries the unwatched ones again.
func (w *treeWatch) wait(ctx context.Context, tick <-chan time.Time) bool {
	var fallback <-chan time.Time
	if w.blind {
		t := time.NewTimer(fallbackTick)
		defer t.Stop()
		fallback = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-w.changed:
		coalesce(ctx, w.changed, func(struct{}) {})
		w.rescan()
	case <-tick:
	case <-fallback:
		w.rescan()
	}
	return true
}

func (w *treeWatch) close() {
	for _, dw := range w.dirs {
		dw.end()
	}
	w.dirs = nil
}
