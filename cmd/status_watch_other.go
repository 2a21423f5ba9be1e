//go:build !linux

package cmd

import (
	"context"
	"os"
	"time"

	"github.com/fsnotify/fsnotify"
)

// treeWatch watches a lock directory and the directories in it (each
// name's queue) for status --watch, with fsnotify (kqueue on the BSDs and
// macOS; Linux has status_watch_linux.go).
type treeWatch struct {
	w *fsnotify.Watcher
}

func watchTree(root string) (*treeWatch, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	t := &treeWatch{w: w}
	t.add(root)
	return t, nil
}

// wait waits for a change in the watched tree, or the tick; false when
// ctx ends.
func (t *treeWatch) wait(ctx context.Context, tick <-chan time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case ev := <-t.w.Events:
		// Every directory created in the burst is watched too (a
		// name's queue directory, made with its first ticket).
		t.created(ev)
		coalesce(ctx, t.w.Events, t.created)
	case <-t.w.Errors:
	case <-tick:
	}
	return true
}

func (t *treeWatch) created(ev fsnotify.Event) {
	if ev.Op&fsnotify.Create != 0 {
		t.add(ev.Name)
	}
}

// add watches path and the directories in it, if it is a directory.
func (t *treeWatch) add(path string) {
	if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
		return
	}
	_ = t.w.Add(path)
	entries, _ := os.ReadDir(path)
	for _, e := range entries {
		if e.IsDir() {
			_ = t.w.Add(path + "/" + e.Name())
		}
	}
}

func (t *treeWatch) close() { t.w.Close() }
