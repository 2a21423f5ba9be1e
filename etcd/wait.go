package etcd

import (
	"context"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// wait sleeps until key (a blocker) or our own key is deleted after the
// view's revision, the watch fails (then the caller reads again), until, or
// ctx ends. It keeps the view's epoch up to date meanwhile.
func (a *acquirer) wait(ctx context.Context, v *view, key string, until time.Time) error {
	rev := v.rev
	if a.w == nil {
		if a.wfails > 0 {
			// The watch failed (no leader, compaction): read again after
			// a short back-off, never in a tight loop.
			d := min(time.Duration(1<<min(a.wfails, 10))*10*time.Millisecond, time.Second)
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return context.Cause(ctx)
			case <-t.C:
			}
		}
		// The watch starts at the server's current revision, not at
		// rev+1: etcd serves a watch that starts in the past from a
		// sweep that runs every 100ms, which would delay the wake-up of
		// a waiter whose blocker went in the meantime. If anything was
		// written since the view, the created notice says so, and the
		// caller looks again.
		a.w = a.l.watch(ctx, a.base, lockKeys(a.base), clientv3.WithCreatedNotify())
	}
	var timer <-chan time.Time
	if !until.IsZero() {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		timer = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-timer:
			return nil
		case <-a.w.timer.C:
			if a.w.silent() {
				// Not even a progress notice: the member serving the
				// watch is stopped or cut off. Read again, and watch
				// anew on a stream of its own.
				a.stopWatch()
				a.wfails++
				return nil
			}
		case wr, ok := <-a.w.ch:
			if ok && !a.w.pass(wr) {
				continue
			}
			if !ok || wr.Err() != nil || wr.Canceled {
				a.stopWatch()
				a.wfails++
				return nil
			}
			a.w.heard()
			a.wfails = 0
			if wr.IsProgressNotify() {
				continue
			}
			if wr.Created && wr.Header.Revision > rev {
				return nil
			}
			wake := false
			for _, ev := range wr.Events {
				k := string(ev.Kv.Key)
				switch {
				case ev.Kv.ModRevision <= rev:
				case k == a.base+keyEpoch && ev.Type == mvccpb.PUT:
					v.epochMod = ev.Kv.ModRevision
					v.epoch, _ = strconv.ParseUint(string(ev.Kv.Value), 10, 64)
				case k == a.base+keyEpoch:
					v.epochMod, v.epoch = 0, 0
				case ev.Type == mvccpb.PUT && k == a.heldKey:
					a.handed = ev.Kv // our predecessor granted us as it released
					return nil
				case ev.Type == mvccpb.DELETE && (k == key || k == a.key):
					wake = true // after the whole txn's events: a hand-over comes with the delete
				}
			}
			if wake {
				return nil
			}
		}
	}
}

func (a *acquirer) stopWatch() {
	if a.w != nil {
		a.w.stop()
		a.w = nil
	}
}
