package etcd

import (
	"context"
	"fmt"
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
// marker is the one made for it, on this session's lease; and the lease's
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
	var last error
	for range 5 {
		sent := time.Now()
		cctx, cancel := context.WithTimeout(ctx, a.l.rpcTimeout())
		var ttl *clientv3.LeaseTimeToLiveResponse
		var terr error
		got := make(chan struct{})
		go func() {
			defer close(got)
			ttl, terr = a.l.cli.TimeToLive(cctx, a.s.id)
		}()
		resp, err := a.l.cli.Txn(cctx).If(
			clientv3.Compare(clientv3.CreateRevision(a.key), "=", a.ticket),
			clientv3.Compare(clientv3.CreateRevision(a.heldKey), "=", grantRev),
			clientv3.Compare(clientv3.LeaseValue(a.heldKey), "=", a.s.id),
		).Then(linearizable).Else(linearizable).Commit()
		<-got
		cancel()
		took := time.Since(sent)
		switch {
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case err == nil && !resp.Succeeded:
			return fmt.Errorf("%w: the grant of %s is not current any more (its keys went: lease revoked or expired, or removed by hand)", elect.ErrSessionLost, a.key)
		case terr == nil && ttl.TTL <= 0:
			err := fmt.Errorf("%w: lease %x of the grant of %s is gone", elect.ErrSessionLost, int64(a.s.id), a.key)
			a.s.end(err, false)
			return err
		case err != nil || terr != nil:
			last = err
			if last == nil {
				last = terr
			}
			if !isUnavailable(last) {
				return fmt.Errorf("etcd: confirming the grant of %s: %w", a.key, last)
			}
			continue
		case took > a.l.confirmBound():
			last = fmt.Errorf("confirming took %v, more than %v", took.Round(time.Millisecond), a.l.confirmBound())
			continue
		case time.Duration(ttl.TTL)*time.Second < a.l.margin:
			// Renewals did not reach the leader for a while: renew
			// now and look again.
			last = fmt.Errorf("lease %x has %ds left, less than the margin %v", int64(a.s.id), ttl.TTL, a.l.margin)
			a.s.renew(ctx)
			continue
		}
		return nil
	}
	return fmt.Errorf("%w: the grant of %s could not be confirmed: %w", elect.ErrUnavailable, a.key, last)
}
