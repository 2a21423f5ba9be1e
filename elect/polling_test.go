package elect

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOnPollingSaysWhy: a request behind a live ticket that has no beacon
// (as an older leaderrun's would be) has nothing to sleep on: it polls,
// says why through Request.OnPolling, and Query shows it as polling; once
// that ticket's owner lets go, it is granted.
func TestOnPollingSaysWhy(t *testing.T) {
	l, dir := testLocker(t)
	q := filepath.Join(dir, "p"+queueSuffix)
	if err := os.Mkdir(q, 0o700); err != nil {
		t.Fatal(err)
	}
	old, err := os.OpenFile(filepath.Join(q, ticketName(1, false)), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := unix.Flock(int(old.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	why := make(chan string, 2)
	done := make(chan error, 1)
	go func() {
		lead, err := l.Acquire(ctx, "p", Request{OnPolling: func(w string) { why <- w }})
		if err == nil {
			lead.Release()
		}
		done <- err
	}()
	select {
	case w := <-why:
		if !strings.Contains(w, "no beacon") {
			t.Errorf("OnPolling said %q; want the reason (no beacon)", w)
		}
	case err := <-done:
		t.Fatalf("Acquire returned %v before polling", err)
	case <-ctx.Done():
		t.Fatal("OnPolling was not called")
	}
	snap, err := l.Query(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Pending) != 1 || !snap.Pending[0].Polling {
		t.Errorf("Query: %+v; want our request pending and polling", snap.Pending)
	}
	old.Close() // its owner lets go: the ticket is dead
	if err := <-done; err != nil {
		t.Fatalf("Acquire after the old ticket went: %v", err)
	}
	if len(why) != 0 {
		t.Errorf("OnPolling called more than once: %q", <-why)
	}
}
