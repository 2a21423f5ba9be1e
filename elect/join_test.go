package elect

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A joiner makes its ticket's files before it takes NAME.state's lock and,
// under it, only draws its number and links them: a process stopped
// while it holds that lock (SIGSTOP lands at any instant) stalls every
// join and grant of the name, so the lock is held as briefly as can be.
// Here the test holds it: the joiner's three files appear, locked,
// nothing is linked, and once the lock is free the joiner leads and its
// temporary names are gone.
func TestJoinPreparesOutsideStateLock(t *testing.T) {
	l, dir := testLocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The name's files exist once one request has come and gone.
	first, err := l.Acquire(ctx, "j", Request{})
	if err != nil {
		t.Fatal(err)
	}
	first.Release()

	state, err := os.OpenFile(filepath.Join(dir, "j"+stateSuffix), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	if err := syscall.Flock(int(state.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	type result struct {
		lead *Leadership
		err  error
	}
	done := make(chan result, 1)
	go func() {
		lead, err := l.Acquire(ctx, "j", Request{})
		done <- result{lead, err}
	}()

	queue := filepath.Join(dir, "j"+queueSuffix)
	var drafts []string
	deadline := time.Now().Add(10 * time.Second)
	for len(drafts) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the joiner made %d of its 3 files while the state lock was held (%v)", len(drafts), drafts)
		}
		time.Sleep(5 * time.Millisecond)
		drafts = drafts[:0]
		names, err := os.ReadDir(queue)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if strings.HasPrefix(n.Name(), tmpPrefix) {
				drafts = append(drafts, n.Name())
			} else if _, ok := parseTicket(n.Name()); ok {
				t.Fatalf("ticket %s linked while the state lock was held", n.Name())
			}
		}
	}
	// Each is locked, so that a prune, which takes an unlocked temporary
	// file for a dead process's, leaves it.
	for _, n := range drafts {
		f, err := os.OpenFile(filepath.Join(queue, n), os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		f.Close()
		if err != syscall.EWOULDBLOCK {
			t.Fatalf("the joiner's %s is not locked (flock: %v)", n, err)
		}
	}
	select {
	case r := <-done:
		t.Fatalf("joined while the state lock was held: %v", r.err)
	default:
	}

	if err := syscall.Flock(int(state.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.lead.Release()
	for _, n := range drafts {
		if _, err := os.Lstat(filepath.Join(queue, n)); !os.IsNotExist(err) {
			t.Errorf("temporary %s left after the join: %v", n, err)
		}
	}
}
