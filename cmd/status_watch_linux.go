package cmd

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/oslock"
)

// treeWatch watches a lock directory and the directories in it (each
// name's queue) for status --watch, on the process's one inotify instance
// (oslock.WatchEntries): it costs the user no instance of its own, and
// links no fsnotify on Linux. Where no watch can be had (the user's
// instances are all taken), it looks every fallbackTick instead.
type treeWatch struct {
	root    string
	changed chan struct{} // a value when a watched directory changed
	done    chan struct{}
	mu      sync.Mutex
	dirs    map[string]*oslock.Watch
	blind   bool // no watch could be had: wait relies on the tick
}

// fallbackTick is how often status --watch looks where it cannot watch.
const fallbackTick = 250 * time.Millisecond

func watchTree(root string) (*treeWatch, error) {
	w := &treeWatch{root: root, changed: make(chan struct{}, 1), done: make(chan struct{}), dirs: map[string]*oslock.Watch{}}
	w.rescan()
	return w, nil
}

// rescan watches every directory of the tree that is not watched yet
// (a queue directory is made with a name's first ticket, and one that
// could not be watched before is tried again) and forgets those that are
// gone.
func (w *treeWatch) rescan() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.blind = false // until a directory cannot be watched (again)
	seen := map[string]bool{}
	add := func(dir string) {
		seen[dir] = true
		if w.dirs[dir] != nil {
			return
		}
		ow, err := oslock.WatchEntries(dir, true)
		if err != nil {
			if _, serr := os.Stat(dir); serr == nil {
				w.blind = true // it exists, and cannot be watched
			}
			return
		}
		w.dirs[dir] = ow
		go w.forward(ow)
	}
	add(w.root)
	entries, _ := os.ReadDir(w.root)
	for _, e := range entries {
		if e.IsDir() {
			add(filepath.Join(w.root, e.Name()))
		}
	}
	for dir, ow := range w.dirs {
		if !seen[dir] {
			ow.Stop()
			delete(w.dirs, dir)
		}
	}
}

// forward passes a directory's events on to w.changed, until close.
func (w *treeWatch) forward(ow *oslock.Watch) {
	for {
		select {
		case <-ow.C:
			select {
			case w.changed <- struct{}{}:
			default:
			}
		case <-w.done:
			return
		}
	}
}

// wait waits for a change in the tree, or tick (or, blind, the fallback
// tick); false when ctx ends. A change is a burst of events (a grant
// writes, renames and removes several entries): it returns once the burst
// is over, so that one snapshot follows it.
func (w *treeWatch) wait(ctx context.Context, tick <-chan time.Time) bool {
	var fallback <-chan time.Time
	w.mu.Lock()
	blind := w.blind
	w.mu.Unlock()
	if blind {
		t := time.NewTimer(fallbackTick)
		defer t.Stop()
		fallback = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-w.changed:
		coalesce(ctx, w.changed, func(struct{}) {})
	case <-tick:
	case <-fallback:
	}
	w.rescan()
	return true
}

func (w *treeWatch) close() {
	close(w.done)
	w.mu.Lock()
	defer w.mu.Unlock()
	for dir, ow := range w.dirs {
		ow.Stop()
		delete(w.dirs, dir)
	}
}
