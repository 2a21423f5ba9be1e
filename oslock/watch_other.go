//go:build !linux

package oslock

import "context"

// Watcher on this platform has no kernel event for "the last descriptor of
// a file was closed", so Wait is a bounded poll: it returns after a delay
// that doubles from 1ms up to 100ms, or when ctx ends.
type Watcher struct{ p poller }

// NewWatcher returns a polling Watcher.
func NewWatcher() (*Watcher, error) { return &Watcher{}, nil }

// Polling reports whether waits are timed polls rather than kernel events.
func (w *Watcher) Polling() bool { return true }

// Add is a no-op here: every Wait is a timed wake-up.
func (w *Watcher) Add(path string, ev Event) error { return nil }

// Reset is a no-op: the back-off keeps growing over the Watcher's life.
func (w *Watcher) Reset() {}

// Wait sleeps for the current back-off or until ctx ends.
func (w *Watcher) Wait(ctx context.Context) error { return w.p.wait(ctx) }

// Close is a no-op.
func (w *Watcher) Close() error { return nil }

// Settle is a no-op here: every Wait is a timed poll.
func (w *Watcher) Settle() {}
