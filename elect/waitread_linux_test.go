package elect

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestWaitPollsInCaller: on Linux a wait on beacons and an inbox sleeps in
// the calling goroutine (no goroutine per file), wakes on a beacon's
// hang-up, on a message, on a beacon opened after its owner went (which
// poll(2) alone never reports), on the parent context's end and on a
// member waited for by a goroutine (a process's exit); the timer runs out
// when nothing happens.
func TestWaitPollsInCaller(t *testing.T) {
	d := testDir(t)
	fifo := func(name string) (owner, reader func() *os.File) {
		if err := d.MakeBeacon(name, 0o600); err != nil {
			t.Fatal(err)
		}
		open := func(own bool) func() *os.File {
			return func() *os.File {
				f, err := d.OpenBeacon(name, own)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.Close() })
				return f
			}
		}
		return open(true), open(false)
	}
	ownB, readB := fifo("b")
	ownI, _ := fifo("i")
	beaconOwner, beacon, inbox := ownB(), readB(), ownI()

	w := newWaitSet(context.Background())
	w.hangup(beacon)
	w.message(inbox)
	fired, err := w.wait(20 * time.Millisecond)
	if fired || err != nil {
		t.Fatalf("nothing happened, and the wait says fired %v, %v", fired, err)
	}
	if n := waitGoroutines(); n > 0 {
		t.Errorf("the wait set has %d goroutines", n)
	}
	if err := d.SignalBeacon("i", nudgeMsg); err != nil {
		t.Fatal(err)
	}
	if fired, err := w.wait(time.Minute); !fired || err != nil {
		t.Fatalf("a message: fired %v, %v", fired, err)
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		beaconOwner.Close()
	}()
	if fired, err := w.wait(time.Minute); !fired || err != nil {
		t.Fatalf("the hang-up: fired %v, %v", fired, err)
	}
	w.close()

	// Opened once the owner was gone: hung up from the start.
	late := newWaitSet(context.Background())
	late.hangup(readB())
	if fired, err := late.wait(time.Minute); !fired || err != nil {
		t.Fatalf("a beacon opened after its owner went: fired %v, %v", fired, err)
	}
	late.close()

	// The parent's end, and a member that a goroutine waits for.
	ownC, readC := fifo("c")
	ownC()
	ctx, cancel := context.WithCancelCause(context.Background())
	c := newWaitSet(ctx)
	c.hangup(readC())
	stop := errors.New("stop")
	time.AfterFunc(10*time.Millisecond, func() { cancel(stop) })
	if fired, err := c.wait(time.Minute); fired || !errors.Is(err, stop) {
		t.Fatalf("the parent's end: fired %v, %v", fired, err)
	}
	c.close()
	g := newWaitSet(context.Background())
	g.hangup(readC())
	done := make(chan struct{})
	g.add(func(ctx context.Context) error {
		select {
		case <-done:
		case <-ctx.Done():
		}
		return nil
	})
	time.AfterFunc(10*time.Millisecond, func() { close(done) })
	if fired, err := g.wait(time.Minute); !fired || err != nil {
		t.Fatalf("a goroutine's member: fired %v, %v", fired, err)
	}
	g.close()
}

// waitGoroutines counts the goroutines, other than the caller's, that run
// a wait set's code.
func waitGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for i, g := range strings.Split(string(buf), "\n\ngoroutine ") {
		if i > 0 && strings.Contains(g, "elect.(*waitSet)") {
			n++
		}
	}
	return n
}

// TestAheadGoneSleepsOn: the one behind the next in line, woken by the
// hang-up of the holder ahead of the next one, sleeps on (on the next
// one's beacon, with the stall timer) instead of looking at the queue
// again; not when a steal may be queued, when more than the holder was
// ahead, or when what woke it was not the holder's hang-up.
func TestAheadGoneSleepsOn(t *testing.T) {
	l, _ := testLocker(t)
	a := testAcquirer(t, l, "g")
	beacon := func(name string) (owner, reader *os.File) {
		t.Helper()
		var err error
		if err := a.q.MakeBeacon(name, 0o600); err != nil {
			t.Fatal(err)
		}
		if owner, err = a.q.OpenBeacon(name, true); err != nil {
			t.Fatal(err)
		}
		if reader, err = a.q.OpenBeacon(name, false); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { owner.Close(); reader.Close() })
		return owner, reader
	}
	holder := entry{name: ticketName(1, false), seq: 1}
	for i, c := range []struct {
		steal  bool
		bahead []entry
		want   bool
	}{
		{false, []entry{holder}, true},
		{true, []entry{holder}, false},
		{false, []entry{{name: ticketName(0, true), steal: true}, holder}, false},
	} {
		_, b := beacon(ticketName(uint64(10*i+2), false) + beaconSuffix)
		hOwner, h := beacon(ticketName(uint64(10*i+1), false) + beaconSuffix)
		if c.steal {
			if err := markSteal(a.q); err != nil {
				t.Fatal(err)
			}
		}
		w := newWaitSet(context.Background())
		w.hangup(b)
		w.hangup(h)
		bw := behind{aheadB: h, bExclusive: true, bahead: c.bahead}
		hOwner.Close()
		if fired, err := w.wait(time.Minute); !fired || err != nil {
			t.Fatalf("case %d: the holder's hang-up: fired %v, %v", i, fired, err)
		}
		got := a.aheadGone(w, &bw)
		if got != c.want {
			t.Errorf("case %d: aheadGone %v, want %v", i, got, c.want)
		}
		if got {
			if !bw.head || bw.stall != StallBound || len(w.polls) != 1 || w.polls[0].f != b {
				t.Errorf("case %d: sleeps on with head %v, stall %v, polls %d", i, bw.head, bw.stall, len(w.polls))
			}
			if fired, err := w.wait(10 * time.Millisecond); fired || err != nil {
				t.Errorf("case %d: nothing more happened, and the wait says fired %v, %v", i, fired, err)
			}
		}
		w.close()
		if c.steal {
			unmarkSteal(a.dir, a.name, a.q)
		}
	}
}
