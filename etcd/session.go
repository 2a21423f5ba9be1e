package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/remote"
)

// session is a Locker's lease. Its own loop renews it with KeepAliveOnce
// and keeps a deadline: the send time of the last acknowledged renewal
// plus the granted TTL, less the margin. The server cannot expire the
// lease before it has received that renewal, so every term of the session
// ends, by this process's monotonic clock, before the lease can expire and
// anyone else can be granted. A keep-alive stream or Session.Done would
// report the loss only when the stream notices (etcd-io/etcd#15922,
// microsoft/etcd3#110); the deadline needs no message at all.
type session struct {
	l       *Locker
	id      clientv3.LeaseID
	ttl     time.Duration   // as granted
	ctx     context.Context // ends with the session, its cause why
	cancel  context.CancelCauseFunc
	done    <-chan struct{} // ctx.Done()
	stopped chan struct{}   // closed once the loop and the revoke are over

	once    sync.Once
	err     error     // why it ended, set before done is closed
	revoked sync.Once // the lease was given back
	remote.Deadline
}

// session returns the Locker's live session, granting a lease when there is
// none (the first request, or the last session was lost).
func (l *Locker) session(ctx context.Context) (*session, error) {
	l.mu.Lock()
	s := l.sess
	l.mu.Unlock()
	if s != nil && s.alive() {
		return s, nil
	}
	l.grantMu.Lock()
	defer l.grantMu.Unlock()
	l.mu.Lock()
	s = l.sess
	l.mu.Unlock()
	if s != nil && s.alive() {
		return s, nil
	}
	sent, resp, err := l.grantLease(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd: granting a lease: %w", err)
	}
	ttl := time.Duration(resp.TTL) * time.Second
	s = &session{l: l, id: resp.ID, ttl: ttl, stopped: make(chan struct{})}
	s.Start(sent.Add(ttl - l.margin))
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.done = s.ctx.Done()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.cli.Revoke(context.Background(), resp.ID)
		return nil, elect.ErrClosed
	}
	l.sess = s
	l.mu.Unlock()
	go s.loop()
	return s, nil
}

// grantLease grants a lease of the TTL. Each try is bounded by
// rpcTimeout: a grant sent to a member that is stopped (it keeps its
// connections and answers nothing) would otherwise wait for it to resume,
// which held requeued waiters for as long as the raft leader was stopped
// (the soak's 7s stalls); the next try goes to another member. A try
// that timed out may have granted a lease nobody renews: it expires
// within the TTL, holding nothing; so may the second of a retry sent
// twice (sendOnce).
func (l *Locker) grantLease(ctx context.Context) (time.Time, *clientv3.LeaseGrantResponse, error) {
	var err error
	for try := range rpcTries {
		gctx, cancel := context.WithTimeout(ctx, l.rpcTimeout())
		sent := time.Now()
		var resp *clientv3.LeaseGrantResponse
		resp, err = sendOnce(gctx, try, func(ctx context.Context) (*clientv3.LeaseGrantResponse, error) {
			return l.cli.Grant(ctx, int64(l.ttl/time.Second))
		})
		cancel()
		if err == nil {
			return sent, resp, nil
		}
		if ctx.Err() != nil || !isUnavailable(err) {
			break
		}
	}
	return time.Time{}, nil, err
}

func (s *session) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return !s.Passed()
	}
}

// end ends the session once with cause. With revoke, its lease is given
// back (when etcd can be reached), so that its keys go now rather than at
// its expiry: at once if none of its terms is held, else when the last is
// released (Locker.untrack). Never earlier: a holder told by the end of its
// term to stop may still be stopping (leaderrun gives COMMAND --grace),
// and the lease, left to expire, keeps everyone else out until then.
func (s *session) end(cause error, revoke bool) {
	s.once.Do(func() {
		s.err = cause
		s.cancel(cause)
		go func() {
			if revoke {
				s.l.revokeIfIdle(s)
			}
			close(s.stopped)
		}()
	})
}

// revoke gives the lease back, once.
func (s *session) revoke() {
	s.revoked.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s.l.cli.Revoke(ctx, s.id)
		cancel()
	})
}

type renewal struct {
	sent time.Time
	ttl  int64
	err  error
}

func (s *session) loop() {
	// Renew three times in every TTL-margin, so that two renewals can be
	// lost before the deadline.
	every := (s.ttl - s.l.margin) / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	timer := time.NewTimer(time.Until(s.At()))
	defer timer.Stop()
	results := make(chan renewal, 4)
	inflight := 0
	// Each renewal is bounded by the interval: one sent to a member that
	// stopped (it keeps the connection and says nothing) is given up, and
	// tried again at once, which the client sends to the next member.
	send := func() {
		if inflight >= 3 {
			return
		}
		inflight++
		go func(sent time.Time) {
			ctx, cancel := context.WithTimeout(context.Background(), every)
			defer cancel()
			stop := context.AfterFunc(s.l.closing, cancel)
			defer stop()
			resp, err := s.l.cli.KeepAliveOnce(ctx, s.id)
			r := renewal{sent: sent, err: err}
			if err == nil {
				r.ttl = resp.TTL
			}
			results <- r
		}(time.Now())
	}
	for {
		// A process stopped past its deadline (SIGSTOP, a VM pause) finds
		// it passed before it handles anything else.
		if s.Passed() {
			// Not revoked now: its holders are only now told to stop.
			// The lease expires by itself, margin later, or is revoked
			// once they have released their terms.
			s.end(fmt.Errorf("%w: lease %x not renewed within its TTL %v less margin %v", elect.ErrSessionLost, int64(s.id), s.ttl, s.l.margin), false)
			return
		}
		select {
		case <-s.done:
			return
		case <-timer.C:
		case <-tick.C:
			send()
		case r := <-results:
			inflight--
			switch {
			case errors.Is(r.err, rpctypes.ErrLeaseNotFound) || (r.err == nil && r.ttl <= 0):
				s.end(fmt.Errorf("%w: lease %x expired or was revoked", elect.ErrSessionLost, int64(s.id)), false)
				return
			case r.err != nil:
				if time.Since(r.sent) >= every/2 {
					send() // it timed out: again now, elsewhere
				}
				continue // the deadline decides
			}
			s.extend(r.sent, r.ttl)
			timer.Reset(time.Until(s.At()))
		}
	}
}

// extend moves the deadline for a renewal sent at sent and answered with
// ttl seconds, unless it has passed already.
func (s *session) extend(sent time.Time, ttl int64) {
	s.Extend(sent.Add(time.Duration(ttl)*time.Second - s.l.margin))
}

// renew renews the lease once now, out of the loop's turn (the loop's
// timer still ends the session at the deadline).
func (s *session) renew(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.l.rpcTimeout())
	defer cancel()
	sent := time.Now()
	resp, err := s.l.cli.KeepAliveOnce(ctx, s.id)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0):
		s.end(fmt.Errorf("%w: lease %x expired or was revoked", elect.ErrSessionLost, int64(s.id)), false)
	case err == nil:
		s.extend(sent, resp.TTL)
	}
}

// bind returns a context that ends with the session's cause when the
// session ends, and with ctx's when ctx does.
func (s *session) bind(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.ctx, func() { cancel(s.err) })
	return ctx, func() { stop(); cancel(nil) }
}
