package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/elect"
)

// A grant can be learned late: the reply to the grant txn, or the watch
// event of a predecessor's hand-over, may come from a member that was
// stopped or cut off for seconds, while this process's renewals reached
// the others. Meanwhile the grant may have ended: etcd 3.4 servers revoke
// leases early when a stopped leader resumes (etcd-io/etcd#15247, fixed
// by #16822), which deletes the grant marker and lets the next request in.
// So no grant is taken up (no Leadership returned, so no COMMAND started)
// until confirm has seen it current, with requests sent after it was
// learned: a linearizable txn (served through the raft leader's read
// index: a stopped or deposed member cannot answer it) that the request
// key still has its creation revision (the ticket) and that the grant
// marker is the one made for it, on this session's lease (unless a
// linearizable request sent less than confirmBound ago saw just that: the
// grant txn itself, or the read that found the grant); and the lease's
// time to live, asked of the leader, no less than the margin. A confirm
// whose answers take longer than confirmBound is not trusted, and is made
// again.

// testHookConfirm, when set by a test, runs just before a grant is
// confirmed.
var testHookConfirm func(a *acquirer)

// linearizable makes a txn of compares linearizable: etcd serves a txn
// with no operations as a serializable read (isTxnSerializable holds for
// an empty list), from whichever member gets it, however far behind; one
// linearizable range (default consistency) is enough.
var linearizable = clientv3.OpGet("\x00", clientv3.WithCountOnly())

// confirmBound is how long a confirmation may take and still count.
func (l *Locker) confirmBound() time.Duration { return max(l.margin/2, 250*time.Millisecond) }

func (a *acquirer) confirm(ctx context.Context, grantRev int64) error {
	if testHookConfirm != nil {
		testHookConfirm(a)
	}
	// The keys first, then the lease: a lease alive after the keys were
	// seen on it still has them (only a delete or the lease's end removes
	// them).
	var err error
	if a.keysAt.IsZero() || time.Since(a.keysAt) > a.l.confirmBound() {
		err = a.confirmTry(ctx, a.confirmKeys(grantRev))
	}
	a.keysAt = time.Time{}
	if err != nil {
		return err
	}
	return a.confirmTry(ctx, a.confirmLease())
}

// confirmTry runs f, a request of confirm, until it succeeds in time, it
// finds the grant not current, or ten tries failed. Each try is bounded
// by confirmBound, so that one sent to a member that stopped is given up
// and sent again (twice at once: sendOnce); answers slower than that do
// not count.
func (a *acquirer) confirmTry(ctx context.Context, f func(ctx context.Context) error) error {
	bound := a.l.confirmBound()
	var last error
	for i := range 10 {
		cctx, cancel := context.WithTimeout(ctx, bound)
		sent := time.Now()
		_, err := sendOnce(cctx, i, func(ctx context.Context) (struct{}, error) { return struct{}{}, f(ctx) })
		took := time.Since(sent)
		cancel()
		switch {
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case err == nil && took <= bound:
			return nil
		case err == nil:
			last = fmt.Errorf("confirming took %v, more than %v", took.Round(time.Millisecond), bound)
		case errors.Is(err, errNotCurrent):
			return err
		case !isUnavailable(err):
			return fmt.Errorf("etcd: confirming the grant of %s: %w", a.key, err)
		default:
			last = err
		}
	}
	return fmt.Errorf("%w: the grant of %s could not be confirmed: %w", elect.ErrUnavailable, a.key, last)
}

// confirmLease asks the leader for the lease's time to live: it must be
// no less than the margin, after one renewal if need be.
func (a *acquirer) confirmLease() func(ctx context.Context) error {
	renewed := false
	var mu sync.Mutex // f runs twice at once on a retry
	return func(ctx context.Context) error {
		ttl, err := a.l.cli.TimeToLive(ctx, a.s.id)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			return err
		case ttl.TTL <= 0:
			err := fmt.Errorf("%w: %w: lease %x of the grant of %s is gone", errNotCurrent, elect.ErrSessionLost, int64(a.s.id), a.key)
			a.s.end(err, false)
			return err
		case time.Duration(ttl.TTL)*time.Second < a.l.margin && !renewed:
			// Renewals did not reach the leader for a while: renew
			// now and look again.
			renewed = true
			a.s.renew(ctx)
			return fmt.Errorf("%w: lease %x has %ds left, less than the margin %v", context.DeadlineExceeded, int64(a.s.id), ttl.TTL, a.l.margin)
		case time.Duration(ttl.TTL)*time.Second < a.l.margin:
			return fmt.Errorf("%w: %w: lease %x has %ds left, less than the margin %v, after a renewal", errNotCurrent, elect.ErrSessionLost, int64(a.s.id), ttl.TTL, a.l.margin)
		}
		return nil
	}
}

// errNotCurrent marks a confirmation that found the grant gone.
var errNotCurrent = errors.New("etcd: grant not current")

// confirmKeys checks, with a linearizable txn, that the request key still
// has its ticket and the grant marker is the one made at grantRev on this
// session's lease.
func (a *acquirer) confirmKeys(grantRev int64) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		resp, err := a.l.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(a.key), "=", a.ticket),
			clientv3.Compare(clientv3.CreateRevision(a.heldKey), "=", grantRev),
			clientv3.Compare(clientv3.LeaseValue(a.heldKey), "=", a.s.id),
		).Then(linearizable).Else(linearizable).Commit()
		if err == nil && !resp.Succeeded {
			return fmt.Errorf("%w: %w: the grant of %s is not current any more (its keys went: lease revoked or expired, or removed by hand)", errNotCurrent, elect.ErrSessionLost, a.key)
		}
		return err
	}
}

// keysSeen notes a grant txn sent at sent that succeeded: it found our
// keys current as it made them.
func (a *acquirer) keysSeen(sent time.Time) { a.keysAt = sent }
