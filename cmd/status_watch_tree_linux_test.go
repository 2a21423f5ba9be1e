package cmd

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The status --watch tree watch wakes for a change in the lock directory
// and in a directory made in it since (a name's queue, made with its
// first ticket), also one made anew at the path of one it watched, with no
// tick to fall back on; where no watch can be had it looks again by itself
// (fallbackTick).
func TestTreeWatch(t *testing.T) {
	root := t.TempDir()
	w, err := watchTree(root)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	waitFor := func(what string, change func()) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		change()
		if !w.wait(ctx, nil) {
			t.Fatalf("no wake-up within 10s after %s", what)
		}
	}
	waitFor("a directory made in the root", func() {
		if err := os.Mkdir(filepath.Join(root, "job.queue"), 0o700); err != nil {
			t.Fatal(err)
		}
	})
	waitFor("a file made in that directory", func() {
		if err := os.WriteFile(filepath.Join(root, "job.queue", "t1"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	})
	waitFor("that file removed", func() {
		if err := os.Remove(filepath.Join(root, "job.queue", "t1")); err != nil {
			t.Fatal(err)
		}
	})
	waitFor("that directory removed and made anew at its path", func() {
		if err := os.Remove(filepath.Join(root, "job.queue")); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(root, "job.queue"), 0o700); err != nil {
			t.Fatal(err)
		}
	})
	waitFor("a file made in the new directory", func() {
		if err := os.WriteFile(filepath.Join(root, "job.queue", "t2"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	})

	blind := &treeWatch{root: root, changed: make(chan struct{}, 1), dirs: map[string]dirWatch{}, blind: true}
	defer blind.close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !blind.wait(ctx, nil) {
		t.Fatal("a watch that could not be had did not look again by itself within 10s")
	}
}
