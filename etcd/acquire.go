package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Acquire asks for the lock name as req says and returns the leadership
// once it is granted. Requests are granted strictly in the order of their
// keys' creation revisions (steals first), following the Web Locks rule for
// modes. When ctx ends first, the request's key is deleted and Acquire
// returns the context's cause; if etcd cannot be reached to delete it, the
// session's lease is given up, so the key goes within the TTL. With
// req.IfAvailable it never waits and returns elect.ErrBusy instead. When the
// session is lost, or the request's key vanishes while it waits, it returns
// an error matching elect.ErrSessionLost and is never granted. After Close
// it returns elect.ErrClosed.
func (l *Locker) Acquire(ctx context.Context, name string, req elect.Request) (*elect.Leadership, error) {
	if err := elect.ValidateName(name); err != nil {
		return nil, err
	}
	if err := validate(req); err != nil {
		return nil, err
	}
	if req.Command == nil {
		req.Command = os.Args
	}
	ctx, done, err := l.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	for try := 0; ; try++ {
		s, err := l.session(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, err
		}
		lead, err := l.acquire(ctx, s, name, req)
		if errors.Is(err, errLeaseGone) && try < 2 {
			// The lease went before this process noticed (revoked by a
			// steal's KillAfter, or expired): nothing was created; start
			// a new session.
			s.end(fmt.Errorf("%w: lease %x is gone", elect.ErrSessionLost, int64(s.id)), false)
			continue
		}
		return lead, err
	}
}

// errLeaseGone: the request could not be created because the session's
// lease no longer exists.
var errLeaseGone = errors.New("etcd: lease not found")

func (l *Locker) acquire(ctx context.Context, s *session, name string, req elect.Request) (*elect.Leadership, error) {
	sctx, unbind := s.bind(ctx)
	defer unbind()
	a := &acquirer{l: l, s: s, name: name, req: req, base: l.base(name)}
	a.id = l.nextID(s)
	a.key = requestKey(a.base, req, a.id)
	a.heldKey = a.base + dirHeld + a.id
	lead, err := a.run(sctx)
	if err != nil {
		a.cleanup()
		if sctx.Err() != nil {
			err = context.Cause(sctx)
		}
		if a.deposed && !errors.Is(err, elect.ErrBusy) {
			err = fmt.Errorf("%w: %w", elect.ErrStealAbandoned, err)
		}
		return nil, err
	}
	return lead, nil
}

// validate is elect's check of a Request. StealStopped is accepted and has
// nothing to do here: a stopped holder cannot renew its lease, so its term
// ends within the TTL anyway.
func validate(r elect.Request) error {
	switch {
	case r.Mode != elect.Exclusive && r.Mode != elect.Shared:
		return fmt.Errorf("%w: unknown mode %d", elect.ErrInvalidRequest, r.Mode)
	case r.Steal && r.IfAvailable:
		return fmt.Errorf("%w: steal cannot be combined with if-available (try-only)", elect.ErrInvalidRequest)
	case r.Steal && r.Mode == elect.Shared:
		return fmt.Errorf("%w: steal cannot be combined with shared mode", elect.ErrInvalidRequest)
	case r.StealStopped < 0:
		return fmt.Errorf("%w: negative StealStopped", elect.ErrInvalidRequest)
	case r.StealStopped > 0 && r.IfAvailable:
		return fmt.Errorf("%w: StealStopped cannot be combined with if-available (try-only)", elect.ErrInvalidRequest)
	case r.KillAfter < 0:
		return fmt.Errorf("%w: negative KillAfter", elect.ErrInvalidRequest)
	case r.KillAfter > 0 && !r.Steal:
		return fmt.Errorf("%w: KillAfter needs Steal", elect.ErrInvalidRequest)
	}
	return nil
}

// acquirer is one request on its way to the lock.
type acquirer struct {
	l    *Locker
	s    *session
	name string
	req  elect.Request
	base string

	id      string
	key     string // the request key
	heldKey string
	ticket  int64 // the request key's CreateRevision, once made
	since   time.Time

	deposed bool      // a steal that found holders with no steal ahead
	killAt  time.Time // with Steal and KillAfter
	killed  map[clientv3.LeaseID]bool

	// after are the requests that joined after ours and before our grant,
	// read in the grant txn; afterKnown says the set is complete, so the
	// holding may hand the lock to its successor on release.
	after      []*mvccpb.KeyValue
	afterKnown bool
	handed     *mvccpb.KeyValue // a grant marker our predecessor made for us

	wch    clientv3.WatchChan
	wstop  context.CancelFunc
	wfails int
}

func (a *acquirer) value() string {
	return encode(a.record())
}

func (a *acquirer) record() request {
	return request{Mode: a.req.Mode, PID: os.Getpid(), Host: a.l.host, UID: os.Getuid(), Since: a.since, Command: a.req.Command, Steal: a.req.Steal}
}

func (a *acquirer) run(ctx context.Context) (*elect.Leadership, error) {
	a.since = time.Now()
	defer a.stopWatch()
	if a.req.IfAvailable {
		return a.tryOnce(ctx)
	}
	// One txn grants at once when nothing is in the way and the epoch is
	// still the one this Locker last saw for the name; otherwise it
	// creates the request and reads the first view: the reads after the
	// put see it, and the newest keys of the queue are then ours and the
	// one just ahead of it.
	last, lastMod := a.l.lastEpoch(a.name)
	epoch := nextEpoch(last)
	h := held{request: a.record(), Epoch: epoch, Granted: time.Now(), Key: a.key}
	put := clientv3.OpPut(a.key, a.value(), clientv3.WithLease(a.s.id))
	resp, err := a.l.cli.Txn(ctx).
		If(append(a.freeCmps(), clientv3.Compare(clientv3.ModRevision(a.base+keyEpoch), "=", lastMod))...).
		Then(put, clientv3.OpPut(a.heldKey, encode(h), clientv3.WithLease(a.s.id)), clientv3.OpPut(a.base+keyEpoch, strconv.FormatUint(epoch, 10))).
		Else(append([]clientv3.Op{put}, a.viewOps(true)...)...).
		Commit()
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return nil, errLeaseGone
		}
		a.ticket = unknownTicket
		return nil, a.rpcErr(ctx, err)
	}
	a.ticket = resp.Header.Revision
	if resp.Succeeded {
		a.afterKnown = a.req.Mode == elect.Exclusive && !a.req.Steal // nobody was queued; the monitor sees who joins
		return a.hold(h, a.ticket)
	}
	v := a.parseView(resp, 1)
	// Holders watch the steal lane: the key's creation deposed them if it
	// heads the lane.
	a.deposed = a.req.Steal && v.blocker == nil && len(v.holders) > 0
	if a.req.Steal && a.req.KillAfter > 0 {
		a.killAt = time.Now().Add(a.req.KillAfter)
	}
	for {
		lead, next, err := a.step(ctx, v)
		if lead != nil || err != nil {
			return lead, err
		}
		if next != nil {
			v = *next
		} else if v, err = a.read(ctx); err != nil {
			return nil, err
		}
	}
}

// rpcErr prefers the context's cause to the RPC's report of it.
func (a *acquirer) rpcErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return fmt.Errorf("etcd: %w", err)
}

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
func (a *acquirer) read(ctx context.Context) (view, error) {
	resp, err := a.l.cli.Txn(ctx).Then(a.viewOps(false)...).Commit()
	if err != nil {
		return view{}, a.rpcErr(ctx, err)
	}
	return a.parseView(resp, 0), nil
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

// step makes one attempt. It returns no leadership and no error to be
// called again, with the next view when it has one (nil: read again).
func (a *acquirer) step(ctx context.Context, v view) (*elect.Leadership, *view, error) {
	var err error
	switch {
	case !v.mine:
		// The key went with our lease or was deleted by someone else: etcd's
		// Campaign would go on waiting for predecessors and then report a
		// leadership nobody holds (etcd-io/etcd#11051, #19597).
		return nil, nil, fmt.Errorf("%w: request key %s was deleted while it waited", elect.ErrSessionLost, a.key)
	case v.granted != nil:
		lead, err := a.granted(ctx, v.granted)
		return lead, nil, err
	case v.blocker != nil:
		err = a.wait(ctx, &v, string(v.blocker.Key), time.Time{})
	case len(v.holders) > 0 && !a.req.Steal:
		err = a.wait(ctx, &v, string(v.holders[0].Key), time.Time{})
	case len(v.holders) > 0:
		// Next in line: the holders were told by our key's creation (they
		// watch the steal lane); now wait for them to let go.
		a.deposed = true
		if !a.killAt.IsZero() && !time.Now().Before(a.killAt) {
			a.revoke(ctx, v.holders)
		}
		err = a.wait(ctx, &v, string(v.holders[0].Key), a.killAt)
	default:
		return a.grant(ctx, v)
	}
	if err != nil {
		return nil, nil, err
	}
	if a.handed != nil {
		lead, err := a.granted(ctx, a.handed)
		return lead, nil, err
	}
	if a.req.Mode == elect.Shared {
		return nil, nil, nil
	}
	// An exclusive request's grant txn checks for itself that nothing is
	// ahead, and the watch kept the epoch up to date: try at once, and
	// take the fresh view from the txn if it fails. A handover is then
	// one round trip, as with concurrency.Election.
	return a.grant(ctx, v)
}

// revoke ends the sessions of the holders that did not let go within
// KillAfter. Their processes, on other hosts perhaps, are not signalled:
// their terms end as their keys go.
func (a *acquirer) revoke(ctx context.Context, holders []*mvccpb.KeyValue) {
	for _, kv := range holders {
		id := clientv3.LeaseID(kv.Lease)
		if id == a.s.id || id == clientv3.NoLease || a.killed[id] {
			continue // our own session: revoking it would end this request
		}
		if _, err := a.l.cli.Revoke(ctx, id); err == nil {
			if a.killed == nil {
				a.killed = map[clientv3.LeaseID]bool{}
			}
			a.killed[id] = true
		}
	}
}

// grant draws the epoch and writes the grant marker in one txn guarded by
// the request key's creation revision, the epoch's last write, an empty
// steal lane (for a steal: no grant marker left) and, for exclusive
// requests and steals, no older request in their queue. If the guard
// fails, the txn reads the next view instead.
func (a *acquirer) grant(ctx context.Context, v view) (*elect.Leadership, *view, error) {
	epoch := nextEpoch(v.epoch)
	now := time.Now()
	h := held{request: a.record(), Epoch: epoch, Granted: now, Key: a.key}
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(a.key), "=", a.ticket),
		clientv3.Compare(clientv3.ModRevision(a.base+keyEpoch), "=", v.epochMod),
	}
	// Our own key is in the range, so it is never empty (an empty range
	// compares as a zero revision and would fail).
	switch {
	case a.req.Steal:
		cmps = append(cmps,
			clientv3.Compare(clientv3.CreateRevision(a.base+dirHeld), "=", 0).WithPrefix(),
			clientv3.Compare(clientv3.CreateRevision(a.base+dirSteal), ">", a.ticket-1).WithPrefix())
	case a.req.Mode == elect.Exclusive:
		cmps = append(cmps,
			clientv3.Compare(clientv3.CreateRevision(a.base+dirSteal), "=", 0).WithPrefix(),
			clientv3.Compare(clientv3.CreateRevision(a.base+dirQueue), ">", a.ticket-1).WithPrefix())
	default:
		// Shared: the view found no exclusive request ahead, and none can
		// join ahead later.
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(a.base+dirSteal), "=", 0).WithPrefix())
	}
	resp, err := a.l.cli.Txn(ctx).If(cmps...).Then(
		clientv3.OpPut(a.base+keyEpoch, strconv.FormatUint(epoch, 10)),
		clientv3.OpPut(a.heldKey, encode(h), clientv3.WithLease(a.s.id)),
		clientv3.OpGet(a.base+dirQueue, clientv3.WithPrefix(), clientv3.WithMinCreateRev(a.ticket+1)),
	).Else(a.viewOps(false)...).Commit()
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, context.Cause(ctx)
		}
		return nil, nil, nil // unknown outcome: the next read finds our marker if it was made
	}
	if !resp.Succeeded {
		next := a.parseView(resp, 0) // a steal came, a shared grant drew an epoch, or our key went
		return nil, &next, nil
	}
	// Exclusive holders that are not steals may hand the lock on: the
	// requests that joined before this grant are read here, those after
	// it come through the monitor's watch.
	a.after = resp.Responses[2].GetResponseRange().Kvs
	a.afterKnown = a.req.Mode == elect.Exclusive && !a.req.Steal
	lead, err := a.hold(h, resp.Header.Revision)
	return lead, nil, err
}

// granted takes up a grant whose txn succeeded but whose reply was lost.
func (a *acquirer) granted(ctx context.Context, kv *mvccpb.KeyValue) (*elect.Leadership, error) {
	var h held
	if err := json.Unmarshal(kv.Value, &h); err != nil || h.Key != a.key {
		return nil, fmt.Errorf("etcd: grant marker %s holds %q, which this request did not write", a.heldKey, kv.Value)
	}
	return a.hold(h, kv.CreateRevision)
}

// nextEpoch is on the flock backend's scale: the larger of the last epoch
// plus one and the wall clock in microseconds, so that epochs go on growing
// when the epoch key is lost with the whole prefix.
func nextEpoch(last uint64) uint64 {
	return max(last+1, uint64(time.Now().UnixMicro()))
}

// freeCmps hold when a new request of this kind could be granted at once:
// no request it would wait for is queued or held, and no steal.
func (a *acquirer) freeCmps() []clientv3.Cmp {
	empty := func(dir string) clientv3.Cmp {
		return clientv3.Compare(clientv3.CreateRevision(a.base+dir), "=", 0).WithPrefix()
	}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(a.key), "=", 0), empty(dirSteal)}
	switch {
	case a.req.Steal:
		return append(cmps, empty(dirHeld))
	case a.req.Mode == elect.Shared:
		return append(cmps, empty(dirExclusive))
	}
	return append(cmps, empty(dirQueue))
}

// tryOnce is IfAvailable: one txn that creates the request and its grant
// together when nothing conflicting is queued or held, else elect.ErrBusy.
// It retries only when a concurrent shared grant moved the epoch.
func (a *acquirer) tryOnce(ctx context.Context) (*elect.Leadership, error) {
	ek := a.base + keyEpoch
	last, mod := a.l.lastEpoch(a.name)
	for range 100 {
		epoch := nextEpoch(last)
		h := held{request: a.record(), Epoch: epoch, Granted: time.Now(), Key: a.key}
		resp, err := a.l.cli.Txn(ctx).
			If(append(a.freeCmps(), clientv3.Compare(clientv3.ModRevision(ek), "=", mod))...).
			Then(
				clientv3.OpPut(a.key, a.value(), clientv3.WithLease(a.s.id)),
				clientv3.OpPut(a.heldKey, encode(h), clientv3.WithLease(a.s.id)),
				clientv3.OpPut(ek, strconv.FormatUint(epoch, 10)),
			).Else(clientv3.OpGet(ek)).Commit()
		if err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return nil, errLeaseGone
			}
			a.ticket = unknownTicket
			return nil, a.rpcErr(ctx, err)
		}
		if resp.Succeeded {
			a.ticket = resp.Header.Revision
			a.afterKnown = a.req.Mode == elect.Exclusive // the queue was empty
			return a.hold(h, resp.Header.Revision)
		}
		var nowLast uint64
		var nowMod int64
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
			nowLast, _ = strconv.ParseUint(string(kvs[0].Value), 10, 64)
			nowMod = kvs[0].ModRevision
		}
		a.l.noteEpoch(a.name, nowLast, nowMod, resp.Header.Revision)
		if nowMod == mod {
			return nil, elect.ErrBusy
		}
		last, mod = nowLast, nowMod // only the epoch was not as we knew it
	}
	return nil, elect.ErrBusy
}

// wait sleeps until key (a blocker) or our own key is deleted after the
// view's revision, the watch fails (then the caller reads again), until, or
// ctx ends. It keeps the view's epoch up to date meanwhile.
func (a *acquirer) wait(ctx context.Context, v *view, key string, until time.Time) error {
	rev := v.rev
	if a.wch == nil {
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
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		a.wch = a.l.cli.Watch(wctx, a.base, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
		a.wstop = cancel
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
		case wr, ok := <-a.wch:
			if !ok || wr.Err() != nil || wr.Canceled {
				a.stopWatch()
				a.wfails++
				return nil
			}
			a.wfails = 0
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
	if a.wstop != nil {
		a.wstop()
		a.wstop, a.wch = nil, nil
	}
}

// unknownTicket marks a request whose creating txn failed with an unknown
// outcome. Its key can only be ours (ids are never reused), so cleanup
// deletes it by name.
const unknownTicket = -1

// cleanup deletes the request key (and a grant marker whose reply was
// lost), guarded by the key's creation revision. If etcd cannot be
// reached, the session is given up, so the key goes with its lease within
// the TTL instead of living as long as this process.
func (a *acquirer) cleanup() {
	if a.ticket == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	txn := a.l.cli.Txn(ctx)
	if a.ticket != unknownTicket {
		txn = txn.If(clientv3.Compare(clientv3.CreateRevision(a.key), "=", a.ticket))
	}
	_, err := txn.Then(clientv3.OpDelete(a.key), clientv3.OpDelete(a.heldKey)).Commit()
	if err != nil {
		a.s.end(fmt.Errorf("%w: could not delete request key %s: %w", elect.ErrSessionLost, a.key, err), true)
	}
}
