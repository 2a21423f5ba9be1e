package etcd

import (
	"context"
	"strconv"
	"time"

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
	// Keys that are no requests, in the steal lane (for requests that
	// are no steals) or among the grant markers (for steals): the grant's
	// guard that the range is empty steps round them.
	strays []*mvccpb.KeyValue
	// When the read that made the view was sent (zero when unknown).
	sent time.Time
	// scanFrom, when not 0: the read ahead of the request found only
	// strays, down to this creation revision; the scan goes on below it,
	// at rev.
	scanFrom int64
}

// aheadDir is where the requests that a request waits for are: every
// request for an exclusive one, the exclusive ones for a shared one, the
// steals for a steal (which waits for the holders too).
func (a *acquirer) aheadDir() string {
	switch {
	case a.req.Steal:
		return a.base + dirSteal
	case a.req.Mode == elect.Shared:
		return a.base + dirExclusive
	}
	return a.base + dirQueue
}

// laneDir is the range a grant needs empty but for strays: the steal lane,
// or for a steal the grant markers.
func (a *acquirer) laneDir() string {
	if a.req.Steal {
		return a.base + dirHeld
	}
	return a.base + dirSteal
}

// viewOps read what a request waits on: the newest requests ahead of it
// in aheadDir (a few, to step over strays), and all of laneDir (empty but
// for the holders a steal waits for, or a steal that came). In the
// creating txn (first) the request is the newest key of its queue.
func (a *acquirer) viewOps(first bool) []clientv3.Op {
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(aheadLimit(first))}
	if !first {
		opts = append(opts, clientv3.WithMaxCreateRev(a.ticket-1))
	}
	return []clientv3.Op{
		clientv3.OpGet(a.key), clientv3.OpGet(a.heldKey), clientv3.OpGet(a.base + keyEpoch),
		clientv3.OpGet(a.aheadDir(), opts...),
		clientv3.OpGet(a.laneDir(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
	}
}

// aheadLimit is how many keys a view reads ahead of the request: the one
// just ahead (and, in the creating txn, ours); strays in front of it are
// stepped over by scanOn.
func aheadLimit(first bool) int64 {
	if first {
		return 2
	}
	return 1
}

// read takes one view at one revision. Each try is bounded, so that a
// member that stopped answering does not hold the waiter: the next try
// goes to another member.
func (a *acquirer) read(ctx context.Context) (view, error) {
	var err error
	for try := range rpcTries {
		rctx, cancel := context.WithTimeout(ctx, a.l.rpcTimeout())
		var resp *clientv3.TxnResponse
		sent := time.Now()
		resp, err = sendOnce(rctx, try, func(ctx context.Context) (*clientv3.TxnResponse, error) {
			return a.l.cli.Txn(ctx).Then(a.viewOps(false)...).Commit()
		})
		cancel()
		if err == nil {
			v := a.parseView(resp, 0)
			v.sent = sent
			return v, nil
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
	a.ahead(&v, kvs(3), aheadLimit(i > 0)) // i > 0: the creating txn's Else
	for _, kv := range kvs(4) {
		switch {
		case string(kv.Key) == a.heldKey:
		case a.req.Steal && isHeld(a.base, kv):
			v.holders = append(v.holders, kv)
		case !a.req.Steal && isRequest(a.base, kv):
			if len(v.holders) == 0 {
				v.holders = []*mvccpb.KeyValue{kv} // the head of the steal lane, in the way as a holder is
			}
		default:
			v.strays = append(v.strays, kv)
		}
	}
	return v
}

// ahead takes the newest request ahead of ours from kvs (newest first),
// or notes where to scan on when kvs held only strays.
func (a *acquirer) ahead(v *view, kvs []*mvccpb.KeyValue, limit int64) {
	v.scanFrom = 0
	for _, kv := range kvs {
		if kv.CreateRevision < a.ticket && string(kv.Key) != a.key && isRequest(a.base, kv) {
			v.blocker = kv
			return
		}
	}
	if int64(len(kvs)) == limit {
		v.scanFrom = kvs[len(kvs)-1].CreateRevision
	}
}

// scanOn goes on reading ahead of the request, at the view's revision,
// below the strays it found.
func (a *acquirer) scanOn(ctx context.Context, v *view) error {
	for v.scanFrom > 0 && v.blocker == nil {
		rctx, cancel := context.WithTimeout(ctx, a.l.rpcTimeout())
		resp, err := a.l.cli.Get(rctx, a.aheadDir(), clientv3.WithPrefix(), clientv3.WithRev(v.rev), clientv3.WithMaxCreateRev(v.scanFrom-1),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(scanLimit))
		cancel()
		if err != nil {
			return a.rpcErr(ctx, err)
		}
		a.ahead(v, resp.Kvs, scanLimit)
	}
	return nil
}

func isRequest(base string, kv *mvccpb.KeyValue) bool {
	_, ok := parseRequest(base, kv)
	return ok
}

func isHeld(base string, kv *mvccpb.KeyValue) bool {
	_, ok := parseHeld(base, kv)
	return ok
}
