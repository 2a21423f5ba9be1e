package elect

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

// startHolder starts a contender process (helper_test.go) holding name
// in dir, and waits until it leads; the test SIGKILLs it.
func startHolder(t *testing.T, dir, name string) *proctest.Proc {
	t.Helper()
	p := spawn(t, dir, name)
	p.Expect("leader")
	return p
}

// nextSnap waits for the watch to report a snapshot that satisfies ok.
func nextSnap(t *testing.T, ch <-chan Snapshot, what string, ok func(Snapshot) bool) Snapshot {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case s, open := <-ch:
			if !open {
				t.Fatalf("watch ended before %s", what)
			}
			if ok(s) {
				return s
			}
		case <-timeout:
			t.Fatalf("watch did not report %s within 10s", what)
		}
	}
}

func TestWatch(t *testing.T) {
	l, dir := testLocker(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	ch, err := l.Watch(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	nextSnap(t, ch, "the empty start", func(s Snapshot) bool { return len(s.Held) == 0 && len(s.Pending) == 0 })

	// A holder in another process, a waiter here.
	p := startHolder(t, dir, "w")
	nextSnap(t, ch, "the other process holding", func(s Snapshot) bool { return len(s.Held) == 1 && s.Held[0].PID == p.PID() })
	got := make(chan *Leadership, 1)
	go func() {
		lead, err := l.Acquire(ctx, "w", Request{})
		if err != nil {
			t.Error(err)
		}
		got <- lead
	}()
	nextSnap(t, ch, "this process waiting", func(s Snapshot) bool { return len(s.Pending) == 1 })

	// SIGKILL: the beacon hangs up, the waiter takes over, the watch says so.
	p.Signal(syscall.SIGKILL)
	lead := <-got
	nextSnap(t, ch, "this process holding", func(s Snapshot) bool {
		return len(s.Held) == 1 && s.Held[0].Epoch == lead.Epoch() && len(s.Pending) == 0
	})
	lead.Release()
	nextSnap(t, ch, "nobody holding", func(s Snapshot) bool { return len(s.Held) == 0 })
	cancel()
	for range ch {
	}
}

// TestWatchHolderDies: a lone holder killed leaves its ticket behind; the
// watch learns of it from the beacon's hang-up, with no queue change.
func TestWatchHolderDies(t *testing.T) {
	l, dir := testLocker(t)
	p := startHolder(t, dir, "w")
	ch, err := l.Watch(testCtx(t), "w")
	if err != nil {
		t.Fatal(err)
	}
	nextSnap(t, ch, "the holder", func(s Snapshot) bool { return len(s.Held) == 1 })
	p.Signal(syscall.SIGKILL)
	nextSnap(t, ch, "the holder gone", func(s Snapshot) bool { return len(s.Held) == 0 })
}

// TestWatchSharesInotify: many watches of many names cost no inotify
// instance of their own; they share the process's one.
func TestWatchSharesInotify(t *testing.T) {
	l, _ := testLocker(t)
	ctx := testCtx(t)
	count := func() int {
		n := 0
		ents, _ := os.ReadDir("/proc/self/fd")
		for _, e := range ents {
			if dst, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && dst == "anon_inode:inotify" {
				n++
			}
		}
		return n
	}
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc")
	}
	// The process's instance, made once.
	first, err := l.Watch(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	<-first
	lead, err := l.Acquire(ctx, "first", Request{})
	if err != nil {
		t.Fatal(err)
	}
	nextSnap(t, first, "first held", func(s Snapshot) bool { return len(s.Held) == 1 })
	lead.Release()
	before := count()
	// Twenty more, each shown to be armed: it reports its name being taken.
	for i := range 20 {
		name := fmt.Sprintf("w%d", i)
		ch, err := l.Watch(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		<-ch
		lead, err := l.Acquire(ctx, name, Request{})
		if err != nil {
			t.Fatal(err)
		}
		nextSnap(t, ch, name+" held", func(s Snapshot) bool { return len(s.Held) == 1 })
		defer lead.Release()
	}
	if after := count(); after != before || after > 1 {
		t.Fatalf("inotify instances: %d before 20 more watches, %d after; want the one shared", before, after)
	}
}
