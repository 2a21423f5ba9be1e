package oslock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// waitResult runs w.Wait in the background.
func waitResult(w *Watcher, ctx context.Context) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- w.Wait(ctx) }()
	return ch
}

func mustNotWake(t *testing.T, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("woke early: %v", err)
	case <-time.After(30 * time.Millisecond):
	}
}

func mustWake(t *testing.T, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up within 10s")
	}
}

func TestWatcherClosedIgnoresReaders(t *testing.T) {
	w, err := NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Polling() {
		t.Skip("inotify unavailable; polling fallback")
	}
	path := filepath.Join(t.TempDir(), "f")
	owner, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(path, Closed); err != nil {
		t.Fatal(err)
	}
	ch := waitResult(w, t.Context())
	// A reader (Query, a probe) opening and closing must not wake us.
	r, _ := os.Open(path)
	r.Close()
	mustNotWake(t, ch)
	owner.Close()
	mustWake(t, ch)
}

func TestWatcherGoneOnUnlink(t *testing.T) {
	w, err := NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	path := filepath.Join(t.TempDir(), "g")
	f, _ := os.Create(path)
	defer f.Close()
	if err := w.Add(path, Gone); err != nil {
		t.Fatal(err)
	}
	ch := waitResult(w, t.Context())
	os.Remove(path)
	mustWake(t, ch)
}

func TestWatcherMissingFile(t *testing.T) {
	w, err := NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Polling() {
		t.Skip("polling fallback accepts any path")
	}
	if err := w.Add(filepath.Join(t.TempDir(), "none"), Closed); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v", err)
	}
}

func TestWatcherCancel(t *testing.T) {
	w, err := NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	path := filepath.Join(t.TempDir(), "c")
	f, _ := os.Create(path)
	defer f.Close()
	w.Add(path, Closed)
	for i := 0; i < 3; i++ { // the watcher stays usable after a cancel
		ctx, cancel := context.WithCancel(t.Context())
		ch := waitResult(w, ctx)
		mustNotWake(t, ch)
		cancel()
		select {
		case err := <-ch:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("cancel did not end Wait")
		}
	}
}

func TestPollerBacksOffToBound(t *testing.T) {
	var p poller
	ctx := t.Context()
	for i := 0; i < 12; i++ {
		p.wait(ctx)
	}
	if p.delay != 100*time.Millisecond {
		t.Fatalf("delay %v, want the 100ms bound", p.delay)
	}
}

func TestTryLockContention(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	a, _ := os.Create(path)
	defer a.Close()
	b, _ := os.Open(path)
	defer b.Close()
	if ok, err := TryLock(a, true); !ok || err != nil {
		t.Fatalf("first lock: %v %v", ok, err)
	}
	if ok, err := TryLock(b, false); ok || err != nil {
		t.Fatalf("conflicting lock must report false, nil: %v %v", ok, err)
	}
	a.Close()
	if ok, err := TryLock(b, false); !ok || err != nil {
		t.Fatalf("lock after close: %v %v", ok, err)
	}
}
