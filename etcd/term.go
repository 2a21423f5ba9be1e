package etcd

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/elect"
)

// holding is a granted request: its keys, and the monitor that ends the
// term when they go, when a steal comes, or when the session ends.
type holding struct {
	l        *Locker
	s        *session
	lead     *elect.Leadership
	end      func(error)
	base     string
	key      string
	heldKey  string
	ticket   int64
	grantRev int64
	steal    bool
	handoff  bool // an exclusive holder, not a steal: may grant its successor

	// What the monitor knows of the requests that joined after ours, for
	// a release that grants the successor in the same txn.
	mu       sync.Mutex
	known    bool                        // after is complete, up to cut
	cut      int64                       // not 0: after has the first requests up to this ticket, of more
	after    map[string]*mvccpb.KeyValue // request keys under q/ newer than ours
	epoch    uint64                      // the epoch key as last seen
	epochMod int64
	deposed  bool

	stop context.CancelFunc
	done chan struct{}
}

// testHookHold, when set by a test, is told of every holding.
var testHookHold func(*holding)

func (a *acquirer) hold(ctx context.Context, h held, grantRev int64) (*elect.Leadership, error) {
	if err := a.confirm(ctx, grantRev); err != nil {
		return nil, err
	}
	t := &holding{l: a.l, s: a.s, base: a.base, key: a.key, heldKey: a.heldKey, ticket: a.ticket, grantRev: grantRev, steal: a.req.Steal,
		handoff: h.Mode == elect.Exclusive && !a.req.Steal, known: a.afterKnown, after: map[string]*mvccpb.KeyValue{}, epoch: h.Epoch, epochMod: grantRev}
	t.note(a.after, a.afterMore)
	lead, end := elect.NewLeadership(elect.Term{Name: a.name, Mode: h.Mode, Epoch: h.Epoch, Since: h.Granted, Release: t.release, Deadline: a.s.Moves})
	t.lead, t.end = lead, end
	a.l.noteEpoch(a.name, h.Epoch, grantRev, grantRev)
	if testHookHold != nil {
		testHookHold(t)
	}
	mctx, stop := context.WithCancel(context.Background())
	t.stop = stop
	t.done = make(chan struct{})
	go t.monitor(mctx)
	a.ticket = 0 // the holding's now: cleanup leaves it
	if err := a.l.track(lead, a.s); err != nil {
		lead.Release()
		return nil, err
	}
	return lead, nil
}

// monitor ends the term with elect.ErrStolen when a steal key appears (for
// a holder that is not itself a steal: a later steal waits for an earlier
// one), and with elect.ErrSessionLost when the session ends or either of
// the term's keys is deleted. It watches the name from the grant on; when
// the watch fails (no leader, compaction) it reads the keys again at once
// and watches on from there.
func (t *holding) monitor(ctx context.Context) {
	defer close(t.done)
	stop := context.AfterFunc(t.s.ctx, func() { t.end(t.s.err) })
	defer stop()
	rev := t.grantRev
	fails := 0
	if t.handoff && !t.known {
		// Granted by our predecessor's release: who queued behind us
		// until the grant is read at the grant's revision, off the
		// handover's path.
		if r, err := t.l.cli.Get(ctx, t.base+dirQueue, clientv3.WithPrefix(), clientv3.WithMinCreateRev(t.ticket+1), clientv3.WithRev(t.grantRev),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(afterLimit)); err == nil {
			t.mu.Lock()
			t.note(r.Kvs, r.More)
			t.known = true
			t.mu.Unlock()
		}
	}
	for ctx.Err() == nil && t.lead.Err() == nil {
		if fails > 0 {
			r, err := t.check(ctx)
			if err != nil {
				sleep(ctx, min(time.Duration(fails)*50*time.Millisecond, time.Second))
				fails++
				continue
			}
			if t.lead.Err() != nil {
				return
			}
			rev = r
		}
		w := t.l.watch(ctx, t.base, lockKeys(t.base), clientv3.WithRev(rev+1))
		t.follow(ctx, w, &rev)
		w.stop()
		fails++
		t.mu.Lock()
		t.known = false // events may be missed until the watch is back
		t.mu.Unlock()
	}
}

// follow handles w's events until it fails, goes silent (a member that
// stopped: the term's keys may be gone unseen) or the term ends.
func (t *holding) follow(ctx context.Context, w *liveWatch, rev *int64) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.timer.C:
			if w.silent() {
				return
			}
		case wr, ok := <-w.ch:
			if ok && !w.pass(wr) {
				continue
			}
			if !ok || wr.Err() != nil || wr.Canceled {
				return
			}
			w.heard()
			for _, ev := range wr.Events {
				t.event(ev)
			}
			if wr.Header.Revision > *rev && !wr.IsProgressNotify() {
				*rev = wr.Header.Revision
			}
			if t.lead.Err() != nil {
				return
			}
		}
	}
}

// note adds the first requests after ours (oldest first), of more when
// more: only a few are read, so that a grant reads O(1) keys, not the
// whole queue.
func (t *holding) note(kvs []*mvccpb.KeyValue, more bool) {
	for _, kv := range kvs {
		if isRequest(t.base, kv) {
			t.after[string(kv.Key)] = kv
		}
	}
	if more && len(kvs) > 0 {
		t.cut = kvs[len(kvs)-1].CreateRevision
	}
}

// event takes one event of the monitor's watch: it ends the term when its
// keys go or a steal comes.
func (t *holding) event(ev *clientv3.Event) {
	k := string(ev.Kv.Key)
	steal := t.noteEvent(ev)
	switch {
	case ev.Type == mvccpb.DELETE && (k == t.key || k == t.heldKey):
		t.end(fmt.Errorf("%w: key %s was deleted (lease revoked, or removed by hand)", elect.ErrSessionLost, k))
	case steal && !t.steal:
		t.end(elect.ErrStolen)
	}
}

// noteEvent notes what ev changes for a hand-over (the epoch, the
// requests after ours, a steal that deposes us) and reports whether it is
// a steal's creation.
func (t *holding) noteEvent(ev *clientv3.Event) bool {
	k := string(ev.Kv.Key)
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case k == t.base+keyEpoch && ev.Type == mvccpb.PUT:
		t.epochMod = ev.Kv.ModRevision
		t.epoch, _ = strconv.ParseUint(string(ev.Kv.Value), 10, 64)
	case k == t.base+keyEpoch:
		t.known = false // the prefix was wiped: no hand-over
	case strings.HasPrefix(k, t.base+dirQueue) && ev.Type == mvccpb.PUT && ev.Kv.Version == 1 && ev.Kv.CreateRevision > t.ticket && isRequest(t.base, ev.Kv):
		t.after[k] = ev.Kv
	case strings.HasPrefix(k, t.base+dirQueue) && ev.Type == mvccpb.DELETE:
		delete(t.after, k)
	}
	steal := ev.Type == mvccpb.PUT && ev.Kv.Version == 1 && strings.HasPrefix(k, t.base+dirSteal) && isRequest(t.base, ev.Kv)
	if steal {
		t.deposed = true
	}
	return steal
}

// check reads the term's keys and the steal lane, as the watch would have
// told, and returns the revision read.
func (t *holding) check(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, t.l.rpcTimeout())
	defer cancel()
	resp, err := t.l.cli.Txn(ctx).Then(
		clientv3.OpGet(t.key), clientv3.OpGet(t.heldKey),
		clientv3.OpGet(t.base+dirSteal, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return 0, err
	}
	r := func(i int) *clientv3.GetResponse {
		return (*clientv3.GetResponse)(resp.Responses[i].GetResponseRange())
	}
	steals := 0
	for _, kv := range r(2).Kvs {
		if isRequest(t.base, kv) {
			steals++
		}
	}
	switch {
	case len(r(0).Kvs) == 0 || r(0).Kvs[0].CreateRevision != t.ticket || len(r(1).Kvs) == 0 || r(1).Kvs[0].CreateRevision != t.grantRev:
		t.end(fmt.Errorf("%w: the term's keys under %s are gone", elect.ErrSessionLost, t.base))
	case !t.steal && steals > 0:
		t.end(elect.ErrStolen)
	}
	return resp.Header.Revision, nil
}

// release deletes the term's keys in one txn guarded by their creation
// revisions, so that a release that comes late (its reply lost, a retry)
// deletes nothing of a newer request (etcd-io/etcd#22082). When etcd
// cannot be reached, the session is given up: the keys go with the lease.
func (t *holding) release() error {
	// The monitor is stopped after the txn, so that the next holder is
	// not kept waiting for the watch's teardown. The term has ended
	// already (ErrReleased), so our own deletes end nothing.
	defer t.l.untrack(t.lead)
	defer func() { t.stop(); <-t.done }()
	select {
	case <-t.s.done:
		return nil // the session's end revokes or expires the keys
	default:
	}
	mine := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(t.heldKey), "=", t.grantRev),
		clientv3.Compare(clientv3.CreateRevision(t.key), "=", t.ticket),
	}
	gone := []clientv3.Op{clientv3.OpDelete(t.heldKey), clientv3.OpDelete(t.key)}
	// Each try is bounded and the txn is guarded by our keys' creation
	// revisions, so it can be sent again: a try that reached a member
	// whose leader has just stopped times out, and the next one, after
	// the election, goes through.
	var err error
	for try := range rpcTries {
		ctx, cancel := context.WithTimeout(context.Background(), t.l.rpcTimeout())
		next, ok := t.successor(ctx)
		_, err = sendOnce(ctx, try, func(ctx context.Context) (*clientv3.TxnResponse, error) {
			if ok {
				return t.l.cli.Txn(ctx).If(append(mine, next.cmps...)...).Then(append(gone, next.ops...)...).Else(clientv3.OpTxn(mine, gone, nil)).Commit()
			}
			return t.l.cli.Txn(ctx).If(mine...).Then(gone...).Commit()
		})
		cancel()
		if err == nil || !isUnavailable(err) {
			break
		}
	}
	if err != nil {
		err = fmt.Errorf("etcd: releasing %s: %w; the session is given up, so its keys go within the TTL", t.heldKey, err)
		t.s.end(fmt.Errorf("%w: %w", elect.ErrSessionLost, err), true)
		return err
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
