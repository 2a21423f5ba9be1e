//go:build !linux

package oslock

import (
	"context"
	"time"
)

// Watcher on this platform has no kernel event for "the last descriptor of
// a file was closed", so Wait is a bounded poll: it returns after a delay
// that doubles from 1ms up to 100ms, or when ctx ends.
type Watcher struct{ delay time.Duration }

// NewWatcher returns a polling Watcher.
func NewWatcher() (*Watcher, error) { return &Watcher{}, nil }

// Add is a no-op here: every Wait is a timed wake-up.
func (w *Watcher) Add(path string, ev Event) error { return nil }

// Reset restarts the back-off.
func (w *Watcher) Reset() { w.delay = 0 }

// Wait sleeps for the current back-off or until ctx ends.
func (w *Watcher) Wait(ctx context.Context) error {
	switch {
	case w.delay == 0:
		w.delay = time.Millisecond
	case w.delay < 100*time.Millisecond:
		w.delay *= 2
	}
	t := time.NewTimer(w.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// Close is a no-op.
func (w *Watcher) Close() error { return nil }
