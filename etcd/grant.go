package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/elect"
)

// grant draws the epoch and writes the grant marker in one txn guarded by
// the request key's creation revision, the epoch's last write, an empty
// steal lane (for a steal: no grant marker left) and, for exclusive
// requests and steals, no older request in their queue. If the guard
// fails, the txn reads the next view instead.
//
// A view read afresh needs no guard that nothing is ahead: it found no
// request older than ours, and none can be made older later. A stale
// view (the blocker it saw has gone since) does, and that guard is a
// range compare that a stray older than ours makes fail; the txn's Else
// then gives the fresh view.
func (a *acquirer) grant(ctx context.Context, v view, stale bool) (*elect.Leadership, *view, error) {
	epoch := nextEpoch(v.epoch)
	now := time.Now()
	h := held{request: a.record(), Epoch: epoch, Granted: now, Key: a.key}
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(a.key), "=", a.ticket),
		clientv3.Compare(clientv3.ModRevision(a.base+keyEpoch), "=", v.epochMod),
	}
	// Our own key is in the range, so it is never empty (an empty range
	// compares as a zero revision and would fail).
	// No steal in the lane (for a steal: no grant marker), but strays.
	cmps = append(cmps, emptyBut(a.laneDir(), v.strays)...)
	if stale && a.req.Mode == elect.Exclusive {
		// Nothing older than ours in the queue: our own key is in the
		// range, so it is never empty (an empty range compares as a zero
		// revision and would fail). Shared requests never take this path.
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(a.aheadDir()), ">", a.ticket-1).WithPrefix())
	}
	gctx, cancel := context.WithTimeout(ctx, a.l.rpcTimeout())
	defer cancel()
	sent := time.Now()
	resp, err := a.l.cli.Txn(gctx).If(cmps...).Then(
		clientv3.OpPut(a.base+keyEpoch, strconv.FormatUint(epoch, 10)),
		clientv3.OpPut(a.heldKey, encode(h), clientv3.WithLease(a.s.id)),
		clientv3.OpGet(a.base+dirQueue, clientv3.WithPrefix(), clientv3.WithMinCreateRev(a.ticket+1),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(afterLimit)),
	).Else(a.viewOps(false)...).Commit()
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, context.Cause(ctx)
		}
		return nil, nil, nil // unknown outcome: the next read finds our marker if it was made
	}
	if !resp.Succeeded {
		next := a.parseView(resp, 0) // a steal came, a shared grant drew an epoch, or our key went
		next.sent = sent
		return nil, &next, nil
	}
	a.keysAt = sent
	// Exclusive holders that are not steals may hand the lock on: the
	// requests that joined before this grant are read here, those after
	// it come through the monitor's watch.
	a.after = resp.Responses[2].GetResponseRange().Kvs
	a.afterMore = resp.Responses[2].GetResponseRange().More
	a.afterKnown = a.req.Mode == elect.Exclusive && !a.req.Steal
	lead, err := a.hold(ctx, h, resp.Header.Revision)
	return lead, nil, err
}

// granted takes up a grant whose txn succeeded but whose reply was lost.
func (a *acquirer) granted(ctx context.Context, kv *mvccpb.KeyValue) (*elect.Leadership, error) {
	var h held
	if err := json.Unmarshal(kv.Value, &h); err != nil || h.Key != a.key {
		return nil, fmt.Errorf("etcd: grant marker %s holds %q, which this request did not write", a.heldKey, kv.Value)
	}
	return a.hold(ctx, h, kv.CreateRevision)
}

// nextEpoch is on the flock backend's scale: the larger of the last epoch
// plus one and the wall clock in microseconds, so that epochs go on growing
// when the epoch key is lost with the whole prefix.
func nextEpoch(last uint64) uint64 {
	return max(last+1, uint64(time.Now().UnixMicro()))
}

// freeCmps hold when a new request of this kind could be granted at once:
// no request it would wait for is queued or held, and no steal; keys that
// are no requests (strays, by directory) excepted.
func (a *acquirer) freeCmps(strays map[string][]*mvccpb.KeyValue) []clientv3.Cmp {
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(a.key), "=", 0)}
	for _, dir := range a.inTheWay() {
		cmps = append(cmps, emptyBut(dir, strays[dir])...)
	}
	return cmps
}

// inTheWay are the directories that must be empty (but for strays) for a
// new request of this kind to be granted at once.
func (a *acquirer) inTheWay() []string {
	switch {
	case a.req.Steal:
		return []string{a.base + dirSteal, a.base + dirHeld}
	case a.req.Mode == elect.Shared:
		return []string{a.base + dirSteal, a.base + dirExclusive}
	}
	return []string{a.base + dirSteal, a.base + dirQueue}
}

// tryOnce is IfAvailable: one txn that creates the request and its grant
// together when nothing conflicting is queued or held, else elect.ErrBusy.
// It retries only when a concurrent shared grant moved the epoch.
func (a *acquirer) tryOnce(ctx context.Context) (*elect.Leadership, error) {
	ek := a.base + keyEpoch
	last, mod := a.l.lastEpoch(a.name)
	var strays map[string][]*mvccpb.KeyValue
	for range 100 {
		sent := time.Now()
		epoch := nextEpoch(last)
		h := held{request: a.record(), Epoch: epoch, Granted: time.Now(), Key: a.key}
		els := []clientv3.Op{clientv3.OpGet(ek)}
		for _, dir := range a.inTheWay() {
			els = append(els, clientv3.OpGet(dir, clientv3.WithPrefix(), clientv3.WithLimit(maxStrays+1)))
		}
		resp, err := a.createTxn(ctx,
			append(a.freeCmps(strays), clientv3.Compare(clientv3.ModRevision(ek), "=", mod)),
			[]clientv3.Op{
				clientv3.OpPut(a.key, a.value(), clientv3.WithLease(a.s.id)),
				clientv3.OpPut(a.heldKey, encode(h), clientv3.WithLease(a.s.id)),
				clientv3.OpPut(ek, strconv.FormatUint(epoch, 10)),
			}, els)
		if err != nil {
			return nil, a.createErr(ctx, err)
		}
		if resp.Succeeded {
			a.keysSeen(sent)
			a.ticket = resp.Header.Revision
			a.afterKnown = a.req.Mode == elect.Exclusive // the queue was empty
			return a.hold(ctx, h, resp.Header.Revision)
		}
		var nowLast uint64
		var nowMod int64
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
			nowLast, _ = strconv.ParseUint(string(kvs[0].Value), 10, 64)
			nowMod = kvs[0].ModRevision
		}
		a.l.noteEpoch(a.name, nowLast, nowMod, resp.Header.Revision)
		// Who is in the way: requests (busy), or only keys that are no
		// requests, which the next try steps round.
		now := map[string][]*mvccpb.KeyValue{}
		moved := nowMod != mod
		for i, dir := range a.inTheWay() {
			for _, kv := range resp.Responses[1+i].GetResponseRange().Kvs {
				if dir == a.base+dirHeld && isHeld(a.base, kv) || dir != a.base+dirHeld && isRequest(a.base, kv) {
					return nil, elect.ErrBusy
				}
				now[dir] = append(now[dir], kv)
			}
			if len(now[dir]) > maxStrays {
				return nil, tooManyStrays(dir)
			}
			if !sameKeys(now[dir], strays[dir]) {
				moved = true
			}
		}
		if !moved {
			return nil, elect.ErrBusy
		}
		last, mod, strays = nowLast, nowMod, now
	}
	return nil, elect.ErrBusy
}

// sameKeys reports whether a and b are the same keys at the same creation
// revisions, in any order.
func sameKeys(a, b []*mvccpb.KeyValue) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int64{}
	for _, kv := range a {
		seen[string(kv.Key)] = kv.CreateRevision
	}
	for _, kv := range b {
		if r, ok := seen[string(kv.Key)]; !ok || r != kv.CreateRevision {
			return false
		}
	}
	return true
}
