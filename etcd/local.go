package etcd

import (
	"context"
	"encoding/json"
	"os"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A waiter that dies (SIGKILL, the OOM killer) leaves its request key
// until its lease expires, TTL later; the request behind it would wait
// that long, and if it was first in line, the lock would pass to a dead
// process and stay there. So a waiter whose predecessor is a waiting
// request of this very kernel and pid namespace (the request's Local,
// see localID) sleeps on the predecessor's pidfd as well, and when it
// exits deletes the predecessor's request key, only while that request is
// not granted: a holder's death is for its own watchdog (leaderrun's) or
// its lease.

// blockerWatch follows one predecessor's process.
type blockerWatch struct {
	key  string
	rev  int64
	stop context.CancelFunc
}

// watchBlocker starts, or keeps, the watch on the process of blocker when
// it is a local waiter; any watch on an earlier blocker ends.
func (a *acquirer) watchBlocker(ctx context.Context, blocker *mvccpb.KeyValue) {
	if w := a.bw; w != nil {
		if w.key == string(blocker.Key) && w.rev == blocker.CreateRevision {
			return
		}
		w.stop()
		a.bw = nil
	}
	var r request
	if localID == "" || json.Unmarshal(blocker.Value, &r) != nil || r.Local != localID || r.PID < 2 || r.PID == os.Getpid() {
		return
	}
	wctx, stop := context.WithCancel(ctx)
	a.bw = &blockerWatch{key: string(blocker.Key), rev: blocker.CreateRevision, stop: stop}
	go a.outlive(wctx, string(blocker.Key), blocker.CreateRevision, r.PID)
}

func (a *acquirer) stopBlockerWatch() {
	if a.bw != nil {
		a.bw.stop()
		a.bw = nil
	}
}

// outlive waits for pid to exit and then deletes its request key, if it
// is still that request and it has no grant marker.
func (a *acquirer) outlive(ctx context.Context, key string, rev int64, pid int) {
	if waitExit(ctx, pid) != nil {
		return
	}
	held := a.base + dirHeld + idOf(key)
	a.l.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(key), "=", rev),
		clientv3.Compare(clientv3.CreateRevision(held), "=", 0),
	).Then(clientv3.OpDelete(key)).Commit()
}
