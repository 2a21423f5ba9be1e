//go:build linux

package oslock

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// A Wait whose context ends just as an event arrives must not leave its
// cancel hook running after it returns: the hook's late read deadline
// would fail the watcher's next Wait with "i/o timeout", and the hook
// reads the watcher's file while Close clears it (a data race under
// -race). Found by the elect chaos test.
func TestWatcherCancelRacesEvent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	touch := func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		f.Close() // IN_CLOSE_WRITE
	}
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		w, err := NewWatcher()
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Add(path, Closed); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); touch(); cancel() }()
		w.Wait(ctx) // an event or the cancel: either is right
		wg.Wait()
		// Whatever the first Wait returned, the next one with a live
		// context returns for the event that is pending.
		touch()
		ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
		err = w.Wait(ctx2)
		cancel2()
		w.Close()
		if err != nil {
			t.Fatalf("iteration %d: Wait after a cancelled Wait: %v", i, err)
		}
	}
}
