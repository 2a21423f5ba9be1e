package bus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	lrbus "github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/etcd"
	"github.com/leaderrun/leaderrun/etcd/internal/seam"
)

// Server is the leader's side of a name's bus over etcd, for one term.
// Create it with Listen; Publish works at once, Serve answers
// requests. Its methods are safe for concurrent use.
type Server struct {
	l    seam.Core
	lead *elect.Leadership
	cfg  busConfig
	t    *busTerm
	pid  int

	// ctx ends when the server stops or the term ends; the writer's and
	// the handlers' contexts derive from it.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	q        []*pubItem
	qBytes   int
	dropped  bool // a message was dropped since the last one queued
	stopping bool
	serving  bool
	wake     chan struct{}
	handlers sync.WaitGroup // the request watcher and the handlers

	writerDone chan struct{}
	stopOnce   sync.Once
	stopped    chan struct{}
	closed     chan struct{} // Close was called
	closeOnce  sync.Once
	unhook     func() bool
}

type pubItem struct {
	data []byte
	gap  bool
	done chan struct{} // nil unless someone waits
	seq  uint64
	err  error
}

// Listen starts serving the bus of lead's name in etcd: it writes the
// term's serve key and channel (on the holder's lease, guarded by the
// grant), so that members see the leader, and starts the writer behind
// Publish. lead must be an exclusive leadership granted by l whose term
// has not ended (else an error matching lrbus.ErrNotExclusive or
// elect.ErrInvalidRequest). It makes two etcd round trips, bounded by
// ten seconds and by the term. Serving ends with Serve's ctx, Close, or
// the term: then the server deletes its keys.
func Listen(locker *etcd.Locker, lead *elect.Leadership, opts ...Option) (*Server, error) {
	l := seam.Of(locker)
	var cfg busConfig
	for _, o := range opts {
		o(&cfg)
	}
	cfg = cfg.withDefaults()
	if lead == nil {
		return nil, fmt.Errorf("%w: Listen needs a leadership; got nil", elect.ErrInvalidRequest)
	}
	ours, closed := l.Owns(lead), l.Closed()
	switch {
	case closed:
		return nil, elect.ErrClosed
	case !ours && lead.Err() == nil:
		return nil, fmt.Errorf("%w: the leadership of %s (epoch %d) was not granted by this etcd Locker; serve the bus with the Locker that acquired it", elect.ErrInvalidRequest, lead.Name(), lead.Epoch())
	case lead.Mode() != elect.Exclusive:
		return nil, fmt.Errorf("%w: %s is held in shared mode", lrbus.ErrNotExclusive, lead.Name())
	case lead.Err() != nil:
		return nil, fmt.Errorf("etcd: cannot serve the bus of %s: its term has ended: %w", lead.Name(), lead.Err())
	}
	ctx, cancel := context.WithTimeout(lead.Context(), busRoundTrip)
	defer cancel()
	stop := context.AfterFunc(l.Closing(), cancel)
	defer stop()
	name, base := lead.Name(), l.Base(lead.Name())
	resp, err := l.Client().Get(ctx, base+seam.DirHeld, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("etcd: reading the grant of %s: %w", name, l.RPCErr(ctx, err))
	}
	var kv *mvccpb.KeyValue
	var h grant
	for _, k := range resp.Kvs {
		var v grant
		if jsonUnmarshal(k.Value, &v) && v.Epoch == lead.Epoch() {
			kv, h = k, v
		}
	}
	if kv == nil {
		return nil, fmt.Errorf("etcd: cannot serve the bus of %s: the grant marker of epoch %d is gone (the term is ending)", name, lead.Epoch())
	}
	info := serving{Name: name, Held: string(kv.Key), GrantRev: kv.CreateRevision, Epoch: h.Epoch, PID: h.PID, Host: h.Host,
		Since: h.Granted, Mode: h.Mode, Handler: cfg.handler != nil, Max: cfg.maxMsg}
	t := newBusTerm(base, info, 0)
	lease := clientv3.WithLease(clientv3.LeaseID(kv.Lease))
	tr, err := l.Client().Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(info.Held), "=", info.GrantRev),
		clientv3.Compare(clientv3.CreateRevision(t.serveKey), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(base+seam.DirSteal), "<", info.GrantRev+1).WithPrefix(),
	).Then(
		clientv3.OpPut(t.serveKey, encode(info), lease),
		clientv3.OpPut(t.busKey, "", lease),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("etcd: announcing the bus of %s: %w", name, l.RPCErr(ctx, err))
	}
	if !tr.Succeeded {
		return nil, fmt.Errorf("etcd: cannot serve the bus of %s epoch %d: it is served already, or the term ended meanwhile (released, expired or stolen)", name, info.Epoch)
	}
	t.serveRev = tr.Header.Revision
	s := &Server{l: l, lead: lead, cfg: cfg, t: t, pid: os.Getpid(), wake: make(chan struct{}, 1),
		writerDone: make(chan struct{}), stopped: make(chan struct{}), closed: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.writer()
	// The term's end stops the server even if Serve never runs, so that
	// its keys go with the term, not with the (longer) session.
	s.unhook = context.AfterFunc(lead.Context(), func() { go s.stop() })
	return s, nil
}

// Epoch is the term the server serves.
func (s *Server) Epoch() uint64 { return s.t.info.Epoch }

// Publish queues data for every member, in the order of Publish calls,
// and returns at once: a writer commits the queue to etcd one message per
// round trip. seq is 0, since a message's place is etcd's to give (members
// publish into the same channel): PublishWait returns it. Publish fails
// with lrbus.ErrTooLarge above the limit, with an error matching
// lrbus.ErrClosed once the server stops or the term ends, and with
// ErrFull when the queue is full: that message is dropped, and the next
// one committed is delivered with Gap set.
func (s *Server) Publish(data []byte) (seq uint64, err error) {
	_, err = s.enqueue(data, false)
	return 0, err
}

// PublishWait is Publish that waits until etcd committed the message in
// this term and returns its seq. If ctx ends first it returns ctx's cause,
// and the message may still be published.
func (s *Server) PublishWait(ctx context.Context, data []byte) (uint64, error) {
	it, err := s.enqueue(data, true)
	if err != nil {
		return 0, err
	}
	select {
	case <-it.done:
		return it.seq, it.err
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
}

func (s *Server) enqueue(data []byte, wait bool) (*pubItem, error) {
	if len(data) > s.cfg.maxMsg {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", lrbus.ErrTooLarge, len(data), s.cfg.maxMsg)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.stopping:
		return nil, s.stoppedErr()
	case len(s.q) >= s.cfg.queue || s.qBytes+len(data) > s.cfg.queueBytes:
		s.dropped = true
		return nil, ErrFull
	}
	it := &pubItem{data: append([]byte(nil), data...), gap: s.dropped}
	if wait {
		it.done = make(chan struct{})
	}
	s.dropped = false
	s.q = append(s.q, it)
	s.qBytes += len(data)
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return it, nil
}

func (s *Server) stoppedErr() error {
	if err := s.lead.Err(); err != nil {
		return fmt.Errorf("%w: the term of epoch %d has ended: %w", lrbus.ErrClosed, s.t.info.Epoch, err)
	}
	return lrbus.ErrClosed
}

// writer commits the queue in order, one guarded Put per message. A
// write whose outcome is unknown (etcd unreachable until the round trip's
// deadline) is not repeated, which could publish it twice: the next
// message carries the gap flag instead. When the guard fails the term is
// over and everything queued fails.
func (s *Server) writer() {
	defer close(s.writerDone)
	gap := false
	for {
		s.mu.Lock()
		for len(s.q) == 0 {
			if s.stopping {
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			select {
			case <-s.wake:
			case <-s.ctx.Done():
			}
			s.mu.Lock()
		}
		it := s.q[0]
		s.q[0] = nil
		s.q = s.q[1:]
		s.qBytes -= len(it.data)
		s.mu.Unlock()
		if s.ctx.Err() != nil {
			s.fail(it, s.stoppedErr())
			continue
		}
		var flags byte
		if gap || it.gap {
			flags |= msgGap
		}
		ctx, cancel := context.WithTimeout(s.ctx, busRoundTrip)
		resp, err := s.l.Client().Txn(ctx).If(s.t.guards()...).Then(
			clientv3.OpGet(s.t.busKey, clientv3.WithKeysOnly()),
			clientv3.OpPut(s.t.busKey, encodeMsg(flags, s.pid, it.data), clientv3.WithIgnoreLease()),
		).Commit()
		cancel()
		switch {
		case err != nil && tooLarge(err):
			s.fail(it, fmt.Errorf("%w: etcd refused %d bytes: %w", lrbus.ErrTooLarge, len(it.data), err))
		case err != nil:
			gap = true
			s.fail(it, fmt.Errorf("%w: etcd: %w", lrbus.ErrLeaderChanged, err))
		case !resp.Succeeded:
			s.fail(it, fmt.Errorf("%w: the term of epoch %d ended before the message was committed; it was not published", lrbus.ErrClosed, s.t.info.Epoch))
			s.cancel() // the term is over: fail the rest at once
		default:
			gap = false
			kvs := resp.Responses[0].GetResponseRange().Kvs
			if len(kvs) == 1 {
				it.seq = uint64(kvs[0].Version) // the version before ours: ours is seq+1
			}
			s.fail(it, nil)
		}
	}
}

func (s *Server) fail(it *pubItem, err error) {
	it.err = err
	if it.done != nil {
		close(it.done)
	}
}

// Serve answers members' requests with the handler (WithHandler) until
// ctx ends, Close is called, or the term ends. It then commits what
// Publish queued (for at most two seconds, while the term lasts), ends
// the handlers' contexts and waits for them, deletes the term's serve
// key, channel and pending requests, and returns. It returns
// context.Cause(ctx), the leadership's Err (or an error saying etcd ended
// the term), or nil after Close.
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	if s.serving || s.stopping {
		s.mu.Unlock()
		if s.serving {
			return errors.New("etcd: Server.Serve called twice")
		}
		return s.stoppedErr()
	}
	s.serving = true
	if s.cfg.handler != nil {
		s.handlers.Go(s.serveRequests)
	}
	s.mu.Unlock()
	var cause error
	select {
	case <-ctx.Done():
		cause = context.Cause(ctx)
	case <-s.lead.Done():
	case <-s.closed:
	case <-s.ctx.Done():
	}
	s.stop()
	select {
	case <-s.closed:
		return nil
	default:
	}
	if cause == nil {
		if cause = s.lead.Err(); cause == nil {
			cause = fmt.Errorf("etcd: the term of %s epoch %d ended in etcd (its grant marker or serve key went, or a steal came)", s.t.info.Name, s.t.info.Epoch)
		}
	}
	return cause
}

// Close stops serving as Serve's end does, and returns once the keys are
// deleted. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	s.stop()
	return nil
}

// stop ends serving once: new publications are refused, the queue is
// committed while the term lasts (busDrain at most), handlers are told
// and waited for, and the keys are deleted in one txn guarded by the
// serve key.
func (s *Server) stop() {
	s.stopOnce.Do(func() {
		s.unhook()
		s.mu.Lock()
		s.stopping = true
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
		t := time.AfterFunc(busDrain, s.cancel)
		select {
		case <-s.writerDone:
		case <-s.lead.Done():
			s.cancel()
			<-s.writerDone
		}
		t.Stop()
		s.cancel()
		s.handlers.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		// Unreachable etcd: the keys go with the holder's lease.
		_, _ = s.l.Client().Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(s.t.serveKey), "=", s.t.serveRev)).Then(
			clientv3.OpDelete(s.t.serveKey), clientv3.OpDelete(s.t.busKey), clientv3.OpDelete(s.t.reqDir, clientv3.WithPrefix()),
		).Commit()
		cancel()
		close(s.stopped)
	})
	<-s.stopped
}

// serveRequests watches the term's request directory and runs the
// handler for each new request; a request deleted meanwhile (its member
// gave up or went) cancels its handler.
func (s *Server) serveRequests() {
	running := map[string]context.CancelFunc{}
	done := map[string]bool{} // requests started, by key and creation revision
	var mu sync.Mutex         // running's; handlers end with s.ctx
	start := func(kv *mvccpb.KeyValue) {
		id := fmt.Sprintf("%s@%d", kv.Key, kv.CreateRevision)
		if kv.Version != 1 || done[id] {
			return
		}
		done[id] = true
		hctx, cancel := context.WithCancel(s.ctx)
		mu.Lock()
		running[string(kv.Key)] = cancel
		mu.Unlock()
		kv = copyKV(kv)
		s.handlers.Go(func() {
			defer cancel()
			s.handle(hctx, kv)
			mu.Lock()
			delete(running, string(kv.Key))
			mu.Unlock()
		})
	}
	hangUp := func(key string) {
		mu.Lock()
		if c := running[key]; c != nil {
			c()
		}
		mu.Unlock()
	}
	rev := s.t.serveRev
	fails := 0
	for s.ctx.Err() == nil {
		if fails > 0 {
			sleep(s.ctx, min(time.Duration(fails)*50*time.Millisecond, time.Second))
			// History may be gone: read what is pending now.
			resp, err := s.l.Client().Get(s.ctx, s.t.reqDir, clientv3.WithPrefix())
			if err != nil {
				fails++
				continue
			}
			for _, kv := range resp.Kvs {
				start(kv)
			}
			rev = resp.Header.Revision
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(s.ctx))
		for wr := range s.l.Client().Watch(wctx, s.t.reqDir, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
			if wr.Err() != nil || wr.Canceled {
				break
			}
			for _, ev := range wr.Events {
				switch ev.Type {
				case mvccpb.PUT:
					start(ev.Kv)
				case mvccpb.DELETE:
					hangUp(string(ev.Kv.Key))
				}
			}
			rev = max(rev, wr.Header.Revision)
		}
		cancel()
		fails++
	}
}

func copyKV(kv *mvccpb.KeyValue) *mvccpb.KeyValue {
	return &mvccpb.KeyValue{Key: append([]byte(nil), kv.Key...), Value: append([]byte(nil), kv.Value...),
		CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision, Version: kv.Version, Lease: kv.Lease}
}

// handle runs the handler for one request and puts the reply into the
// request's key, once (version 1 to 2) and only while the term lasts.
func (s *Server) handle(ctx context.Context, kv *mvccpb.KeyValue) {
	var reply []byte
	pid, uid, data, ok := decodeReq(kv.Value)
	if !ok {
		reply = append([]byte{repErr}, "malformed request"...)
	} else {
		out, err := s.cfg.handler(ctx, lrbus.Request{PID: pid, UID: uid, Data: data})
		switch {
		case ctx.Err() != nil && s.ctx.Err() != nil:
			reply = []byte{repStopped}
		case ctx.Err() != nil:
			return // the member hung up
		case err != nil:
			reply = append([]byte{repErr}, err.Error()...)
		case len(out) > s.cfg.maxMsg:
			reply = fmt.Appendf([]byte{repTooBig}, "%d bytes, the limit is %d", len(out), s.cfg.maxMsg)
		default:
			reply = append([]byte{repOK}, out...)
		}
	}
	// The reply goes out also when the server is stopping (the keys are
	// deleted only after every handler returned), but not past the term.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), busRoundTrip)
	defer cancel()
	stop := context.AfterFunc(s.lead.Context(), cancel)
	defer stop()
	key := string(kv.Key)
	_, err := s.l.Client().Txn(wctx).If(append(s.t.guards(),
		clientv3.Compare(clientv3.CreateRevision(key), "=", kv.CreateRevision),
		clientv3.Compare(clientv3.Version(key), "=", 1))...,
	).Then(clientv3.OpPut(key, string(reply), clientv3.WithIgnoreLease())).Commit()
	if err != nil && tooLarge(err) {
		s.l.Client().Txn(wctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", kv.CreateRevision), clientv3.Compare(clientv3.Version(key), "=", 1)).
			Then(clientv3.OpPut(key, string(repTooBig)+"etcd refused the reply's size", clientv3.WithIgnoreLease())).Commit()
	}
}
