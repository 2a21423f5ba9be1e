package etcd

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// succession is what a release adds to its txn to grant the successor.
type succession struct {
	cmps []clientv3.Cmp
	ops  []clientv3.Op
}

// successor is the grant of the next request in line, for an exclusive
// holder (not a steal, not deposed) whose successor is an exclusive
// request: the release deletes our keys and writes the successor's grant
// marker and epoch in one txn, so the successor is granted without a
// round trip of its own, as a Web Locks queue hands a released lock on.
// The txn checks that the successor's key is still the one seen, that no
// steal is queued, and that the epoch key is as we last saw it; else it
// only deletes ours. No request older than the successor can be left but
// ours: those older than ours went before our grant, and every later one
// joined after the successor, which is the oldest we know of (from the
// grant txn's read and the watch since, or from a read now).
func (t *holding) successor(ctx context.Context) (succession, bool) {
	if !t.handoff {
		return succession{}, false
	}
	next, epoch, epochMod, known, ok := t.knownSuccessor()
	if !ok {
		return succession{}, false
	}
	if !known {
		if next, epoch, epochMod, ok = t.readSuccessor(ctx); !ok {
			return succession{}, false
		}
	}
	return t.succession(next, epoch, epochMod)
}

// knownSuccessor returns the oldest request that joined after ours as
// the monitor knows them (known false: they must be read), and the epoch
// as last seen; ok false when there is no hand-over to make (deposed, or
// nobody after us).
func (t *holding) knownSuccessor() (next *mvccpb.KeyValue, epoch uint64, epochMod int64, known, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	known, epoch, epochMod = t.known, t.epoch, t.epochMod
	if known {
		for _, kv := range t.after {
			if next == nil || kv.CreateRevision < next.CreateRevision {
				next = kv
			}
		}
		if t.cut != 0 && (next == nil || next.CreateRevision > t.cut) {
			known, next = false, nil // the few we read went: read again
		}
	}
	if t.deposed || (known && next == nil) {
		return nil, 0, 0, false, false
	}
	return next, epoch, epochMod, known, true
}

// readSuccessor reads the oldest request after ours and the epoch key;
// false when there is none, or only strays (a successor behind strays
// grants itself).
func (t *holding) readSuccessor(ctx context.Context) (*mvccpb.KeyValue, uint64, int64, bool) {
	resp, err := t.l.cli.Txn(ctx).Then(
		clientv3.OpGet(t.base+dirQueue, clientv3.WithPrefix(), clientv3.WithMinCreateRev(t.ticket+1),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(scanLimit)),
		clientv3.OpGet(t.base+keyEpoch),
	).Commit()
	if err != nil {
		return nil, 0, 0, false
	}
	kvs, ek := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	var next *mvccpb.KeyValue
	for _, kv := range kvs {
		if isRequest(t.base, kv) {
			next = kv
			break
		}
	}
	if next == nil || len(ek) == 0 {
		return nil, 0, 0, false
	}
	epoch, _ := strconv.ParseUint(string(ek[0].Value), 10, 64)
	return next, epoch, ek[0].ModRevision, true
}

// succession is the guarded grant of next at the epoch after epoch, for
// an exclusive successor on a lease.
func (t *holding) succession(next *mvccpb.KeyValue, epoch uint64, epochMod int64) (succession, bool) {
	nk := string(next.Key)
	if nk == t.key {
		// Our own key's name, made anew: only a replayed release of an
		// earlier request under the same name sees this, and it must
		// delete nothing of it (the guards below see to that) nor grant it.
		return succession{}, false
	}
	if !strings.HasPrefix(nk, t.base+dirExclusive) || next.Lease == 0 {
		return succession{}, false // a shared successor grants itself
	}
	var r request
	if err := json.Unmarshal(next.Value, &r); err != nil {
		return succession{}, false
	}
	e := nextEpoch(epoch)
	h := held{request: r, Epoch: e, Granted: time.Now(), Key: nk}
	return succession{
		cmps: []clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(nk), "=", next.CreateRevision),
			clientv3.Compare(clientv3.CreateRevision(t.base+dirSteal), "=", 0).WithPrefix(),
			clientv3.Compare(clientv3.ModRevision(t.base+keyEpoch), "=", epochMod),
		},
		ops: []clientv3.Op{
			clientv3.OpPut(t.base+dirHeld+idOf(nk), encode(h), clientv3.WithLease(clientv3.LeaseID(next.Lease))),
			clientv3.OpPut(t.base+keyEpoch, strconv.FormatUint(e, 10)),
		},
	}, true
}
