//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package oslock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func openLockFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestWaitSleepsUntilReleased: Wait returns once the holder lets go, and
// the lock is then the waiter's.
func TestWaitSleepsUntilReleased(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	holder, waiter, other := openLockFile(t, path), openLockFile(t, path), openLockFile(t, path)
	if ok, err := TryLock(holder, true); !ok || err != nil {
		t.Fatal(ok, err)
	}
	got := make(chan error, 1)
	go func() { got <- Wait(context.Background(), waiter, true) }()
	select {
	case err := <-got:
		t.Fatalf("Wait returned %v while the lock was held", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := Unlock(holder); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return within 10s of the release")
	}
	if ok, _ := TryLock(other, true); ok {
		t.Fatal("the lock Wait took is not held")
	}
}

// TestWaitGivenUp: a Wait whose ctx ends returns its cause, and the wait
// it leaves behind takes the lock only to drop it: once the holder lets
// go, the lock is free, although the waiter's file is still open.
func TestWaitGivenUp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	holder, waiter, other := openLockFile(t, path), openLockFile(t, path), openLockFile(t, path)
	if ok, err := TryLock(holder, true); !ok || err != nil {
		t.Fatal(ok, err)
	}
	cause := errors.New("given up")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(20*time.Millisecond, func() { cancel(cause) })
	if err := Wait(ctx, waiter, true); !errors.Is(err, cause) {
		t.Fatalf("Wait = %v, want the context's cause", err)
	}
	Unlock(holder)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if ok, err := TryLock(other, true); err != nil || ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lock is still held 10s after the holder let go: the given-up wait kept it")
		}
	}
}
