package elect

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/oslock"
)

// A process forked by another goroutine holds copies of this process's
// descriptors until its exec closes them, and a flock belongs to the open
// file description, not to one descriptor: a lock given up by closing
// its descriptor alone lasts as long as such a copy. These tests make the
// copy with dup(2), which is what the fork does, and check that the state
// file's lock (taken for every join and grant) and the name's lock (at
// Release) end when they are given up all the same. Before the state
// file was unlocked explicitly, the start-up of `leaderrun -- true` spun
// on it for 0.1-0.4 ms while the runtime's probe child or the watchdog
// being spawned held a copy.

// dupOpen returns a new descriptor of the open file description this
// process has for path (found in /proc/self/fd), closed when t ends.
func dupOpen(t *testing.T, path string) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == path {
			c, err := unix.Dup(fd)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(c) })
			return
		}
	}
	t.Fatalf("%s is not open", path)
}

// lockable reports whether path can be locked exclusively by a new open.
func lockable(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ok, err := oslock.TryLock(f, true)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestStateUnlockedDespiteCopies(t *testing.T) {
	d := testDir(t)
	path := filepath.Join(d.Path(), "n"+stateSuffix)
	if _, err := updateState(testCtx(t), d, "n", func(s *state) {
		dupOpen(t, path)
		s.seq++
	}); err != nil {
		t.Fatal(err)
	}
	if !lockable(t, path) {
		t.Fatal("the state file stays locked after the update, through a copy of its descriptor")
	}
}

func TestReleaseUnlocksDespiteCopies(t *testing.T) {
	l, dir := testLocker(t)
	lead, err := l.Acquire(testCtx(t), "n", Request{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "n"+lockSuffix)
	dupOpen(t, path)
	if err := lead.Release(); err != nil {
		t.Fatal(err)
	}
	if !lockable(t, path) {
		t.Fatal("the lock file stays locked after Release, through a copy of its descriptor")
	}
}
