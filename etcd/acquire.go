package etcd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/elect"
)

// Acquire asks for the lock name as req says and returns the leadership
// once it is granted. Requests are granted strictly in the order of their
// keys' creation revisions (steals first), following the Web Locks rule for
// modes. When ctx ends first, the request's key is deleted and Acquire
// returns the context's cause; if etcd cannot be reached to delete it, the
// session's lease is given up, so the key goes within the TTL. With
// req.IfAvailable it never waits and returns elect.ErrBusy instead. When the
// session is lost, or the request's key vanishes while it waits, it returns
// an error matching elect.ErrSessionLost and is never granted; when etcd
// cannot serve it (no leader, a timeout), one matching elect.ErrUnavailable.
// Either way the request holds no place in line any more. After Close
// it returns elect.ErrClosed.
func (l *Locker) Acquire(ctx context.Context, name string, req elect.Request) (*elect.Leadership, error) {
	if err := elect.ValidateName(name); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
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
	// The requests whose creating txn timed out, each fenced and deleted
	// by the next one (createTxn).
	var abandoned []abandonedReq
	for try := 0; ; try++ {
		s, err := l.session(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, unavailable(err)
		}
		lead, gone, err := l.acquire(ctx, s, name, req, abandoned)
		abandoned = gone
		if errors.Is(err, errCreateUnknown) && try < rpcTries {
			continue // a new request, sent to another member
		}
		if len(abandoned) > 0 {
			l.abandon(s, l.base(name), abandoned)
		}
		if errors.Is(err, errLeaseGone) && try < 2 {
			// The lease went before this process noticed (revoked by a
			// steal's KillAfter, or expired): nothing was created; start
			// a new session.
			s.end(fmt.Errorf("%w: lease %x is gone", elect.ErrSessionLost, int64(s.id)), false)
			continue
		}
		if err != nil && ctx.Err() != nil {
			return nil, err // the context's cause, as acquire reports it
		}
		return lead, unavailable(err)
	}
}

// errLeaseGone: the request could not be created because the session's
// lease no longer exists.
var errLeaseGone = errors.New("etcd: lease not found")

// acquire makes one request. It returns the requests abandoned so far:
// none once a creating txn has been answered (it fenced and deleted the
// earlier ones), those given and this one when its creating txn timed
// out (errCreateUnknown).
func (l *Locker) acquire(ctx context.Context, s *session, name string, req elect.Request, abandoned []abandonedReq) (*elect.Leadership, []abandonedReq, error) {
	sctx, unbind := s.bind(ctx)
	defer unbind()
	a := &acquirer{l: l, s: s, name: name, req: req, base: l.base(name), abandoned: abandoned}
	a.id = l.nextID(s)
	a.key = requestKey(a.base, req, a.id)
	a.heldKey = a.base + dirHeld + a.id
	lead, err := a.run(sctx)
	if errors.Is(err, errCreateUnknown) && sctx.Err() == nil {
		// Not cleaned up: the next request's creating txn fences this
		// one (so that it does nothing if it runs late) and deletes its
		// keys (if it ran).
		return nil, append(a.abandoned, abandonedReq{id: a.id, key: a.key, heldKey: a.heldKey}), err
	}
	if a.ticket == unknownTicket {
		a.abandoned = append(a.abandoned, abandonedReq{id: a.id, key: a.key, heldKey: a.heldKey})
	}
	gone := a.abandoned
	if err != nil {
		a.cleanup()
		if sctx.Err() != nil {
			err = context.Cause(sctx)
		}
		if a.deposed && !errors.Is(err, elect.ErrBusy) {
			err = fmt.Errorf("%w: %w", elect.ErrStealAbandoned, err)
		}
		return nil, gone, err
	}
	return lead, gone, nil
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
	afterMore  bool // after is the first scanLimit of more
	afterKnown bool

	// keysAt is the send time of the last linearizable request that
	// found our request key and grant marker current (a grant txn that
	// succeeded, or a view that holds our grant); confirm need not look
	// at the keys again when that was less than confirmBound ago.
	keysAt time.Time

	abandoned []abandonedReq // see createTxn

	w      *liveWatch
	wkey   string // what w watches
	wrev   int64  // its creation revision
	wfails int
	bw     *blockerWatch // local.go
}

func (a *acquirer) value() string {
	return encode(a.record())
}

func (a *acquirer) record() request {
	return request{Mode: a.req.Mode, PID: os.Getpid(), Host: a.l.host, UID: os.Getuid(), Since: a.since, Command: a.req.Command, Steal: a.req.Steal, Local: localID}
}

func (a *acquirer) run(ctx context.Context) (*elect.Leadership, error) {
	a.since = time.Now()
	defer a.stopWatch()
	defer a.stopBlockerWatch()
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
	sent := time.Now()
	resp, err := a.createTxn(ctx,
		append(a.freeCmps(nil), clientv3.Compare(clientv3.ModRevision(a.base+keyEpoch), "=", lastMod)),
		[]clientv3.Op{put, clientv3.OpPut(a.heldKey, encode(h), clientv3.WithLease(a.s.id)), clientv3.OpPut(a.base+keyEpoch, strconv.FormatUint(epoch, 10))},
		append([]clientv3.Op{put}, a.viewOps(true)...))
	if err != nil {
		return nil, a.createErr(ctx, err)
	}
	a.ticket = resp.Header.Revision
	if resp.Succeeded {
		a.keysSeen(sent)
		a.afterKnown = a.req.Mode == elect.Exclusive && !a.req.Steal // nobody was queued; the monitor sees who joins
		return a.hold(ctx, h, a.ticket)
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

// errCreateUnknown: the txn that creates the request timed out or could
// not be served, so whether it made the key is not known. The key is
// deleted by name (cleanup) and Acquire tries again with a new request,
// which the client sends to the next member.
var errCreateUnknown = errors.New("etcd: the request's creation could not be confirmed")

// createErr is the error of a failed creating txn (bounded by
// rpcTimeout, so that one sent to a stopped member does not wait for it).
func (a *acquirer) createErr(ctx context.Context, err error) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return errLeaseGone
	}
	a.ticket = unknownTicket
	if ctx.Err() == nil && isUnavailable(err) {
		return fmt.Errorf("%w: %w", errCreateUnknown, err)
	}
	return a.rpcErr(ctx, err)
}

// rpcErr prefers the context's cause to the RPC's report of it.
func (a *acquirer) rpcErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return fmt.Errorf("etcd: %w", err)
}

// step makes one attempt. It returns no leadership and no error to be
// called again, with the next view when it has one (nil: read again).
func (a *acquirer) step(ctx context.Context, v view) (*elect.Leadership, *view, error) {
	if err := a.scanOn(ctx, &v); err != nil {
		return nil, nil, err
	}
	if len(v.strays) > maxStrays {
		return nil, nil, tooManyStrays(a.laneDir())
	}
	var err error
	switch {
	case !v.mine:
		// The key went with our lease or was deleted by someone else: etcd's
		// Campaign would go on waiting for predecessors and then report a
		// leadership nobody holds (etcd-io/etcd#11051, #19597).
		return nil, nil, fmt.Errorf("%w: request key %s was deleted while it waited", elect.ErrSessionLost, a.key)
	case v.granted != nil:
		if v.mine && v.granted.Lease == int64(a.s.id) && !v.sent.IsZero() {
			a.keysAt = v.sent
		}
		lead, err := a.granted(ctx, v.granted)
		return lead, nil, err
	case v.blocker != nil:
		a.watchBlocker(ctx, v.blocker)
		err = a.wait(ctx, &v, v.blocker, time.Time{})
	case len(v.holders) > 0 && !a.req.Steal:
		err = a.wait(ctx, &v, v.holders[0], time.Time{})
	case len(v.holders) > 0:
		// Next in line: the holders were told by our key's creation (they
		// watch the steal lane); now wait for them to let go.
		a.deposed = true
		if !a.killAt.IsZero() && !time.Now().Before(a.killAt) {
			a.revoke(ctx, v.holders)
		}
		err = a.wait(ctx, &v, v.holders[0], a.killAt)
	default:
		return a.grant(ctx, v, false)
	}
	if err != nil {
		return nil, nil, err
	}
	if a.req.Mode == elect.Shared {
		return nil, nil, nil
	}
	// An exclusive request's grant txn can check for itself that nothing
	// is ahead: try at once, and take the fresh view from the txn if it
	// fails (as it does when our predecessor handed us the lock: the
	// view has our grant marker). A handover is then one round trip, as
	// with concurrency.Election.
	return a.grant(ctx, v, true)
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
	// Each try is bounded, as a read's: the next goes to another member.
	var err error
	for try := range rpcTries {
		ctx, cancel := context.WithTimeout(context.Background(), a.l.rpcTimeout())
		_, err = sendOnce(ctx, try, func(ctx context.Context) (*clientv3.TxnResponse, error) {
			txn := a.l.cli.Txn(ctx)
			if a.ticket != unknownTicket {
				txn = txn.If(clientv3.Compare(clientv3.CreateRevision(a.key), "=", a.ticket))
			}
			return txn.Then(clientv3.OpDelete(a.key), clientv3.OpDelete(a.heldKey)).Commit()
		})
		cancel()
		if err == nil || !isUnavailable(err) {
			break
		}
	}
	if err != nil {
		a.s.end(fmt.Errorf("%w: could not delete request key %s: %w", elect.ErrSessionLost, a.key, err), true)
	}
}

// errFenced: a creating txn found its own fence.
var errFenced = errors.New("etcd: a creating txn found its fence (a later request abandoned it)")

// abandonedReq is a request whose creating txn timed out.
type abandonedReq struct{ id, key, heldKey string }

// createTxn sends a creating txn (a request's put, a grant at once, the
// first view) bounded by rpcTimeout, so that one sent to a member that is
// stopped (it keeps its connections and answers nothing) does not wait
// for it to resume: that held requeued waiters for as long as the raft
// leader was stopped (the soak's 7s stalls). A creating txn given up may
// still run later, when that member resumes and reads what was sent to
// it; it must then do nothing, or it would make a request (or a grant)
// that nobody waits for, on a lease that lives. So every creating txn is
// guarded by its fence key (P/N/gone/<id>) being absent, and the next
// request of the same Acquire writes the fences of those abandoned before
// it and deletes their keys, in its own creating txn: an abandoned txn
// that ran before it is undone, one that runs after it finds its fence.
// The inner txn's compares see the state before the deletes (etcd
// evaluates every compare of a txn first); its reads come after them.
func (a *acquirer) createTxn(ctx context.Context, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
	ops := a.fenceOps(a.abandoned)
	ops = append(ops, clientv3.OpTxn(cmps, then, els))
	cctx, cancel := context.WithTimeout(ctx, a.l.rpcTimeout())
	defer cancel()
	resp, err := a.l.cli.Txn(cctx).If(clientv3.Compare(clientv3.Version(a.base+dirGone+a.id), "=", 0)).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		// Only a later request of this Acquire writes our fence, and
		// there is none while we wait for this answer.
		return nil, fmt.Errorf("%w: request %s", errFenced, a.key)
	}
	a.abandoned = nil
	inner := resp.Responses[len(resp.Responses)-1].GetResponseTxn()
	return &clientv3.TxnResponse{Header: resp.Header, Succeeded: inner.Succeeded, Responses: inner.Responses}, nil
}

// fenceOps writes the fences of the abandoned requests and deletes their
// keys.
func (a *acquirer) fenceOps(abandoned []abandonedReq) []clientv3.Op {
	var ops []clientv3.Op
	for _, p := range abandoned {
		ops = append(ops, clientv3.OpPut(a.base+dirGone+p.id, "", clientv3.WithLease(a.s.id)), clientv3.OpDelete(p.key), clientv3.OpDelete(p.heldKey))
	}
	return ops
}

// abandon fences and deletes the requests an Acquire abandoned when it
// gives up; if etcd cannot be reached, the session is given up, so that
// they go with its lease.
func (l *Locker) abandon(s *session, base string, abandoned []abandonedReq) {
	a := &acquirer{l: l, s: s, base: base}
	var err error
	for try := range rpcTries {
		ctx, cancel := context.WithTimeout(context.Background(), l.rpcTimeout())
		_, err = sendOnce(ctx, try, func(ctx context.Context) (*clientv3.TxnResponse, error) {
			return l.cli.Txn(ctx).Then(a.fenceOps(abandoned)...).Commit()
		})
		cancel()
		if err == nil || !isUnavailable(err) {
			break
		}
	}
	if err != nil {
		s.end(fmt.Errorf("%w: could not fence abandoned requests under %s: %w", elect.ErrSessionLost, base, err), true)
	}
}
