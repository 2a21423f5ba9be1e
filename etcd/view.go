package etcd

import (
	"context"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/elect"
)

// view is one consistent read of what a request waits on.
type view struct {
	rev      int64
	mine     bool
	granted  *mvccpb.KeyValue // our grant marker (a grant whose reply was lost)
	blocker  *mvccpb.KeyValue // the nearest conflicting request ahead
	holders  []*mvccpb.KeyValue
	epoch    uint64
	epochMod int64
}

// viewOps read what a request waits on: for an exclusive request the
// newest request ahead of it, for a shared one the newest exclusive request
// ahead, and the head of the steal lane; for a steal the newest steal ahead
// and the grant markers. In the creating txn (first) the request is the
// newest key of its queue, so the two newest are read instead.
func (a *acquirer) viewOps(first bool) []clientv3.Op {
	ahead := func(dir string) clientv3.Op {
		if first && a.req.Mode == elect.Exclusive { // steals are exclusive too
			return clientv3.OpGet(a.base+dir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2))
		}
		opts := []clientv3.OpOption{clientv3.WithPrefix()}
		if !first {
			opts = append(opts, clientv3.WithMaxCreateRev(a.ticket-1))
		}
		return clientv3.OpGet(a.base+dir, append(opts, clientv3.WithLastCreate()...)...)
	}
	ops := []clientv3.Op{clientv3.OpGet(a.key), clientv3.OpGet(a.heldKey), clientv3.OpGet(a.base + keyEpoch)}
	switch {
	case a.req.Steal:
		return append(ops, ahead(dirSteal),
			clientv3.OpGet(a.base+dirHeld, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)))
	case a.req.Mode == elect.Shared:
		return append(ops, ahead(dirExclusive),
			clientv3.OpGet(a.base+dirSteal, append([]clientv3.OpOption{clientv3.WithPrefix()}, clientv3.WithFirstCreate()...)...))
	}
	return append(ops, ahead(dirQueue),
		clientv3.OpGet(a.base+dirSteal, append([]clientv3.OpOption{clientv3.WithPrefix()}, clientv3.WithFirstCreate()...)...))
}

// read takes one view at one revision.
// Each try is bounded, so that a member that stopped answering does not
// hold the waiter: the next try goes to another member.
func (a *acquirer) read(ctx context.Context) (view, error) {
	var err error
	for range 3 {
		rctx, cancel := context.WithTimeout(ctx, a.l.rpcTimeout())
		var resp *clientv3.TxnResponse
		resp, err = a.l.cli.Txn(rctx).Then(a.viewOps(false)...).Commit()
		cancel()
		if err == nil {
			return a.parseView(resp, 0), nil
		}
		if ctx.Err() != nil || !isUnavailable(err) {
			break
		}
	}
	return view{}, a.rpcErr(ctx, err)
}

// parseView reads the answers to viewOps, from the i-th response on.
func (a *acquirer) parseView(resp *clientv3.TxnResponse, i int) view {
	kvs := func(n int) []*mvccpb.KeyValue { return resp.Responses[i+n].GetResponseRange().Kvs }
	v := view{rev: resp.Header.Revision}
	if k := kvs(0); len(k) == 1 && k[0].CreateRevision == a.ticket {
		v.mine = true
	}
	if k := kvs(1); len(k) == 1 {
		v.granted = k[0]
	}
	if k := kvs(2); len(k) == 1 {
		v.epochMod = k[0].ModRevision
		v.epoch, _ = strconv.ParseUint(string(k[0].Value), 10, 64)
	}
	a.l.noteEpoch(a.name, v.epoch, v.epochMod, v.rev)
	for _, kv := range kvs(3) {
		if kv.CreateRevision < a.ticket && string(kv.Key) != a.key {
			v.blocker = kv
			break
		}
	}
	if a.req.Steal {
		for _, kv := range kvs(4) {
			if string(kv.Key) != a.heldKey {
				v.holders = append(v.holders, kv)
			}
		}
	} else if k := kvs(4); len(k) == 1 {
		v.holders = k // the head of the steal lane, in the way as a holder is
	}
	return v
}
