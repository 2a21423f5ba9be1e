package elect

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"time"

	"github.com/leaderrun/leaderrun/oslock"
)

// watchFallback is how often Watch looks again where no event can be had
// (no inotify: not Linux, or no instance left to the user).
const watchFallback = 250 * time.Millisecond

// Watch is Query made event-driven, as etcd's Observe or client-go's
// OnNewLeader: it sends a snapshot of name's holders and queue at once,
// then a new one after every change, until ctx ends; the channel is then
// closed. A reader that falls behind gets the latest snapshot, never a
// backlog: intermediate ones are dropped. Closing the Locker ends it too.
//
// It wakes on the kernel's word, not by polling Query: a change of the
// queue directory (a ticket added, granted, deposed or removed), reported
// by the process's one inotify instance (shared with every holder; Watch
// takes no instance of its own), and the exit of a holder or waiter, even
// of SIGKILL (a pidfd on Linux, the hang-up of its beacon elsewhere). It does not see a holder being stopped or continued (Holder
// State is as of the last change), nor flock(1) users of the lock file
// until the queue changes. Where inotify cannot be had, it looks again
// every 250ms.
func (l *Locker) Watch(ctx context.Context, name string) (<-chan Snapshot, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	first, err := l.Query(ctx, name)
	if err != nil {
		return nil, err
	}
	// Counted as a request in flight: Close ends it and waits for it
	// before closing the directory it reads.
	ctx, end, err := l.begin(ctx)
	if err != nil {
		return nil, err
	}
	ch := make(chan Snapshot, 1)
	ch <- first
	go l.watch(ctx, end, name, first, ch)
	return ch, nil
}

func (l *Locker) watch(ctx context.Context, end func(), name string, last Snapshot, ch chan Snapshot) {
	defer end()
	defer close(ch)
	if l.alone {
		<-ctx.Done()
		return
	}
	for {
		w := l.arm(ctx, name)
		snap, err := l.Query(ctx, name)
		if err != nil {
			w.close()
			if ctx.Err() != nil || errors.Is(err, ErrClosed) {
				return
			}
			// A directory replaced under us, say: try again shortly.
			if !sleepCtx(ctx, watchFallback) {
				return
			}
			continue
		}
		if !reflect.DeepEqual(snap, last) {
			last = snap
			latest(ch, snap)
		}
		woke := w.wait()
		w.close()
		if !woke {
			return
		}
	}
}

// latest puts snap in ch, replacing a snapshot the reader has not taken.
func latest(ch chan Snapshot, snap Snapshot) {
	for {
		select {
		case ch <- snap:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}

// watchArm is what one round of Watch sleeps on.
type watchArm struct {
	ctx     context.Context
	watches []*oslock.Watch
	ws      *waitSet
	files   []*os.File
	poll    bool
}

// arm sets up the events before the snapshot is taken, so that a change
// in between is not missed.
func (l *Locker) arm(ctx context.Context, name string) *watchArm {
	a := &watchArm{ctx: ctx, ws: newWaitSet(ctx)}
	d, err := l.current()
	if err != nil {
		a.poll = true
		return a
	}
	queue := filepath.Join(d.Path(), name+queueSuffix)
	if w, err := oslock.WatchEntries(queue, true); err == nil {
		a.watches = append(a.watches, w)
	} else if errors.Is(err, fs.ErrNotExist) {
		// No queue yet: wake when it is made.
		if w, err := oslock.WatchEntries(d.Path(), false); err == nil {
			a.watches = append(a.watches, w)
		} else {
			a.poll = true
		}
	} else {
		a.poll = true
	}
	// Every ticket's owner is waited for: its death changes the snapshot
	// without a change of the queue (nobody may be there to remove its
	// ticket). On Linux by pidfd, which is readable only once the process
	// has exited, its lock released; the beacon may hang up a moment
	// before the lock goes, depending on the order of the owner's
	// descriptors. Elsewhere by the beacon.
	if q, err := d.Sub(name+queueSuffix, false, oslock.DirOptions{GroupShared: l.group}); err == nil {
		if entries, err := listQueue(q); err == nil {
			for _, e := range entries {
				if runtime.GOOS == "linux" {
					if r, err := readRecord(q, e.name); err == nil && r.PID != os.Getpid() {
						a.ws.gone(r.PID)
						continue
					}
				}
				f, err := q.OpenBeacon(e.name+beaconSuffix, false)
				if err != nil {
					continue
				}
				if oslock.HungUp(f) {
					f.Close() // its owner is gone already: the listing will say
					continue
				}
				a.files = append(a.files, f)
				a.ws.hangup(f)
			}
		}
		q.Close()
	}
	return a
}

// wait sleeps until an event, and reports false once ctx has ended.
func (a *watchArm) wait() bool {
	cases := make([]<-chan struct{}, 0, len(a.watches))
	for _, w := range a.watches {
		cases = append(cases, w.C)
	}
	var tick <-chan time.Time
	if a.poll {
		t := time.NewTimer(watchFallback)
		defer t.Stop()
		tick = t.C
	}
	// At most two directory watches: select on them directly.
	var c1, c2 <-chan struct{}
	if len(cases) > 0 {
		c1 = cases[0]
	}
	if len(cases) > 1 {
		c2 = cases[1]
	}
	select {
	case <-a.ctx.Done():
		return false
	case <-a.ws.events():
	case <-c1:
	case <-c2:
	case <-tick:
	}
	return a.ctx.Err() == nil
}

func (a *watchArm) close() {
	for _, w := range a.watches {
		w.Stop()
	}
	a.ws.close()
	for _, f := range a.files {
		f.Close()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
