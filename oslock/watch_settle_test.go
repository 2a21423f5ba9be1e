//go:build linux

package oslock

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Removing a watch queues IN_IGNORED for it; that must not wake a Wait
// on the watches that replaced it, or a waiter spins at full CPU.
func TestWatcherIgnoresRemovedWatches(t *testing.T) {
	w, err := NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, nil, 0o600)
	fb, _ := os.OpenFile(b, os.O_RDWR|os.O_CREATE, 0o600)
	for i := 0; i < 5; i++ {
		w.Reset()
		if err := w.Add(a, Closed|Gone); err != nil {
			t.Fatal(err)
		}
		w.Reset()
		if err := w.Add(b, Closed); err != nil {
			t.Fatal(err)
		}
	}
	ch := waitResult(w, t.Context())
	mustNotWake(t, ch)
	fb.Close()
	mustWake(t, ch)
}

// After an event the kernel may not have dropped the closed file's flock
// yet, so Wait also wakes on a short back-off for a while, then sleeps on
// events alone again.
func TestWatcherSettlesAfterEvent(t *testing.T) {
	w, err := NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	path := filepath.Join(t.TempDir(), "s")
	f, _ := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	w.Add(path, ClosedAny)
	g, _ := os.OpenFile(path, os.O_RDWR, 0)
	g.Close()
	mustWake(t, waitResult(w, t.Context())) // the event
	wakes := 0
	deadline := time.Now().Add(10 * time.Second)
	for w.settle > 0 && time.Now().Before(deadline) {
		if err := w.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		wakes++
	}
	if w.settle != 0 || wakes < 5 || wakes > 40 {
		t.Fatalf("settle %v after %d timed wake-ups; want a bounded back-off that ends", w.settle, wakes)
	}
	ch := waitResult(w, t.Context())
	mustNotWake(t, ch) // back to events only
	f.Close()
	mustWake(t, ch)
}
