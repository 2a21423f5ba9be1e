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
	st, err := a.startWatch(ctx, blocker)
	if err != nil {
		return err
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
				a.watchFailed()
				return nil
			}
		case wr, ok := <-a.w.own:
			if a.heard(ctx, v, blocker, &st, wr, ok, true) {
				return nil
			}
		case wr, ok := <-a.w.ch:
			if a.heard(ctx, v, blocker, &st, wr, ok, false) {
				return nil
			}
		}
	}
}

// waitState is what a wait has heard of its watch's start: once both of
// a new watch's keys' watches are created, a read tells whether anything
// went between the view and their start.
type waitState struct {
	fresh      bool // the watch was started by this wait
	created    int  // created notices heard: two, ours and the blocker's
	createdRev int64
}

// startWatch keeps the watch of blocker (and of our own key) if there is
// one, else starts it, after a back-off when the last one failed.
func (a *acquirer) startWatch(ctx context.Context, blocker *mvccpb.KeyValue) (waitState, error) {
	key := string(blocker.Key)
	if a.w != nil && (a.wkey != key || a.wrev != blocker.CreateRevision) {
		a.stopWatch()
	}
	if a.w != nil {
		return waitState{}, nil
	}
	if a.wfails > 0 {
		// The watch failed (no leader, compaction, silence): read again
		// after a short back-off, never in a tight loop.
		d := min(time.Duration(1<<min(a.wfails, 10))*10*time.Millisecond, time.Second)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return waitState{}, context.Cause(ctx)
		case <-t.C:
		}
	}
	// The watch starts at the server's current revision, not at rev+1:
	// etcd serves a watch that starts in the past from a sweep that runs
	// every 100ms, which would delay the wake-up of a waiter whose
	// blocker went in the meantime. If anything was written since the
	// view, the created notice says so, and a read of the key tells
	// whether it is still there.
	a.w = a.l.watch(ctx, key, clientv3.WithCreatedNotify())
	a.w.watchAlso(a.key, clientv3.WithCreatedNotify()) // a key of ours deleted by hand: wake, and the read says so
	a.wkey, a.wrev = key, blocker.CreateRevision
	return waitState{fresh: true}, nil
}

// heard takes one response of the watch of our own key (own) or of the
// blocker's, and reports whether the wait is over (the caller reads
// again): the watch failed, the key was deleted (the blocker: or made
// anew), or a new watch started after something was written that a read
// finds has moved the blocker or our key.
func (a *acquirer) heard(ctx context.Context, v *view, blocker *mvccpb.KeyValue, st *waitState, wr clientv3.WatchResponse, ok, own bool) bool {
	if ok && !a.w.pass(wr) {
		return false
	}
	if !ok || wr.Err() != nil || wr.Canceled {
		a.watchFailed()
		return true
	}
	a.w.heard()
	if !own {
		a.wfails = 0
	}
	if wr.Created {
		st.created, st.createdRev = st.created+1, max(st.createdRev, wr.Header.Revision)
		return st.fresh && st.created == 2 && st.createdRev > v.rev && !a.still(ctx, blocker)
	}
	for _, ev := range wr.Events {
		if ev.Type == mvccpb.DELETE || (!own && ev.Kv.CreateRevision != blocker.CreateRevision) {
			return true
		}
	}
	return false
}

// watchFailed gives the watch up, so that the next wait starts another
// after a back-off.
func (a *acquirer) watchFailed() {
	a.stopWatch()
	a.wfails++
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
