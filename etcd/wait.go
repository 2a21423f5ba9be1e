package etcd

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// wait sleeps until the request ahead of ours that blocks it (blocker, a
// holder, the head of the steal lane) is deleted after the view's revision,
// the watch fails or goes silent (then the caller reads again), until, or
// ctx ends.
//
// It watches that one key, as concurrency.Mutex watches the key before
// its own: a hand-over, a cancel or a death in the queue wakes the one
// waiter behind it, not every waiter of the name. Our predecessor's
// release deletes its key in the txn that writes our grant marker, so its
// delete is also how we hear that we were handed the lock (the grant txn
// that follows fails and reads it). It also watches our own request key,
// on the same stream, so that a waiter whose key was deleted (by hand, or
// its lease revoked) learns at once (etcd-io/etcd#19597); neither key
// changes when others hand the lock on.
func (a *acquirer) wait(ctx context.Context, v *view, blocker *mvccpb.KeyValue, until time.Time) error {
	key := string(blocker.Key)
	if a.w != nil && (a.wkey != key || a.wrev != blocker.CreateRevision) {
		a.stopWatch()
	}
	// A new watch: once both of its keys' watches are created, a read
	// tells whether anything went between the view and their start.
	fresh, created, createdRev := false, 0, int64(0)
	if a.w == nil {
		if a.wfails > 0 {
			// The watch failed (no leader, compaction, silence): read
			// again after a short back-off, never in a tight loop.
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
		// written since the view, the created notice says so, and a read
		// of the key tells whether it is still there.
		a.w = a.l.watch(ctx, key, clientv3.WithCreatedNotify())
		a.w.watchAlso(a.key, clientv3.WithCreatedNotify()) // a key of ours deleted by hand: wake, and the read says so
		a.wkey, a.wrev = key, blocker.CreateRevision
		fresh = true
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
		case wr, ok := <-a.w.own:
			if ok && !a.w.pass(wr) {
				continue
			}
			if !ok || wr.Err() != nil || wr.Canceled {
				a.stopWatch()
				a.wfails++
				return nil
			}
			a.w.heard()
			if wr.Created {
				created, createdRev = created+1, max(createdRev, wr.Header.Revision)
				if fresh && created == 2 && createdRev > v.rev && !a.still(ctx, blocker) {
					return nil
				}
				continue
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					return nil
				}
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
			if wr.Created {
				created, createdRev = created+1, max(createdRev, wr.Header.Revision)
				if fresh && created == 2 && createdRev > v.rev && !a.still(ctx, blocker) {
					return nil
				}
				continue
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE || ev.Kv.CreateRevision != blocker.CreateRevision {
					return nil
				}
			}
		}
	}
}

// still reports whether blocker and our own key are still there, as they
// were; false also when the read fails (the caller then reads the whole
// view).
func (a *acquirer) still(ctx context.Context, blocker *mvccpb.KeyValue) bool {
	rctx, cancel := context.WithTimeout(ctx, a.l.rpcTimeout())
	defer cancel()
	resp, err := a.l.cli.Txn(rctx).If(
		clientv3.Compare(clientv3.CreateRevision(string(blocker.Key)), "=", blocker.CreateRevision),
		clientv3.Compare(clientv3.CreateRevision(a.key), "=", a.ticket),
	).Then(linearizable).Commit()
	return err == nil && resp.Succeeded
}

func (a *acquirer) stopWatch() {
	if a.w != nil {
		a.w.stop()
		a.w = nil
	}
}
