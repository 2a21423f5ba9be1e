package elect

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestFence(t *testing.T) {
	ctx := testCtx(t)
	path := filepath.Join(t.TempDir(), "res.fence")
	f, err := OpenFence(path)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	do := func(e uint64) error { return f.Do(ctx, e, func() error { ran++; return nil }) }
	if err := do(10); err != nil {
		t.Fatal(err)
	}
	if err := do(10); err != nil {
		t.Fatalf("same epoch again: %v", err)
	}
	if err := f.Raise(ctx, 20); err != nil {
		t.Fatal(err)
	}
	// The old leader wakes up: refused, even though it never saw 20 run.
	if err := do(10); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("stale epoch: %v", err)
	}
	if err := f.Raise(ctx, 15); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("stale raise: %v", err)
	}
	if ran != 2 {
		t.Fatalf("fn ran %d times, want 2", ran)
	}
	if e, err := f.Epoch(ctx); err != nil || e != 20 {
		t.Fatalf("Epoch %d, %v", e, err)
	}
	// fn runs under the lock: concurrent Do calls never overlap.
	var mu sync.Mutex
	inside := 0
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f2, _ := OpenFence(path)
			f2.Do(ctx, uint64(20+i), func() error {
				mu.Lock()
				inside++
				if inside > 1 {
					t.Error("two Do calls overlapped")
				}
				mu.Unlock()
				mu.Lock()
				inside--
				mu.Unlock()
				return nil
			})
		}()
	}
	wg.Wait()
	os.WriteFile(path, []byte("junk"), 0o600)
	if err := do(100); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt fence: %v", err)
	}
}
