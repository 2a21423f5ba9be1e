package bus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	lrbus "github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/etcd"
	"github.com/leaderrun/leaderrun/etcd/internal/seam"
)

// Client is a member of a name's bus over etcd: it follows the
// leaders of the name for as long as it is open, with one Watch of the
// name's keys. Its methods are safe for concurrent use.
type Client struct {
	l        seam.Core
	name     string
	base     string
	o        DialOptions
	pid, uid int

	ctx       context.Context // ends with Close or the Locker's Close
	cancel    context.CancelFunc
	unhook    func() bool
	loopDone  chan struct{}
	outDone   chan struct{}
	bg        sync.WaitGroup // requests' first cleanup
	closeOnce sync.Once

	mu      sync.Mutex
	term    *busTerm // nil between leaders
	lastSeq uint64   // of term, as delivered or known lost
	gap     bool     // the next message or EventLeader follows a loss
	rev     int64    // the last revision applied
	pending map[string]*pendingReq
	changed chan struct{} // closed and replaced on every change of term
	closed  bool

	q       []lrbus.Event // events waiting for Events
	qMsgs   int
	qWake   chan struct{}
	out     chan lrbus.Event
	wcancel context.CancelFunc // the current watch's, for tests
	hold    chan struct{}      // set by tests: the loop waits before watching again
}

type pendingReq struct {
	term  *busTerm
	rev   int64 // the request key's creation revision, once known
	once  sync.Once
	done  chan struct{}
	reply []byte
	err   error
}

func (p *pendingReq) finish(reply []byte, err error) {
	p.once.Do(func() {
		p.reply, p.err = reply, err
		close(p.done)
	})
}

// Dial makes a member of name's lrbus. Its first event is EventLeader
// for the leader serving now; it fails with lrbus.ErrNoLeader when nobody
// serves, unless o.WaitForLeader, and then waits until a leader serves or
// ctx ends (returning ctx's cause). ctx bounds only Dial; the client
// lives until Close or the Locker's Close.
func Dial(ctx context.Context, locker *etcd.Locker, name string, o DialOptions) (*Client, error) {
	if err := elect.ValidateName(name); err != nil {
		return nil, err
	}
	l := seam.Of(locker)
	if l.Closed() {
		return nil, elect.ErrClosed
	}
	if o.EventBuffer <= 0 {
		o.EventBuffer = DefaultEventBuffer
	}
	c := &Client{l: l, name: name, base: l.Base(name), o: o, pid: os.Getpid(), uid: os.Getuid(),
		loopDone: make(chan struct{}), outDone: make(chan struct{}), pending: map[string]*pendingReq{},
		changed: make(chan struct{}), qWake: make(chan struct{}, 1), out: make(chan lrbus.Event)}
	snap, err := c.read(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd: reading the bus of %s: %w", name, c.l.RPCErr(ctx, err))
	}
	if snap.term == nil && !o.WaitForLeader {
		return nil, fmt.Errorf("%w: %s", lrbus.ErrNoLeader, name)
	}
	c.rev = snap.rev
	if snap.term != nil {
		c.term, c.lastSeq = snap.term, snap.seq
		c.emit(lrbus.Event{Kind: lrbus.EventLeader, Leader: snap.term.leader()})
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.unhook = context.AfterFunc(l.Closing(), c.cancel)
	go c.run()
	go c.deliver()
	if snap.term == nil {
		if _, err := c.leaderTerm(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Events delivers messages and leader changes in etcd's order. It is
// closed after Close. Messages beyond DialOptions.EventBuffer left unread are
// dropped, and the next message (or EventLeader) delivered has Gap set.
func (c *Client) Events() <-chan lrbus.Event { return c.out }

// Leader returns the leader that serves now, as far as the client has
// seen, and false between leaders.
func (c *Client) Leader() (lrbus.Leader, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.term == nil {
		return lrbus.Leader{}, false
	}
	return c.term.leader(), true
}

// Publish sends data to every member, this one included, and returns once
// etcd committed it in the current leader's term. It fails with
// lrbus.ErrNoLeader between leaders (or waits, with WaitForLeader),
// lrbus.ErrTooLarge above the leader's limit or etcd's, and
// lrbus.ErrLeaderChanged when etcd could not be reached to know whether it
// was committed. A term that ended before etcd committed the message
// never gets it: Publish then goes on as if called after the change (the
// next leader, or ErrNoLeader). If ctx ends first, Publish returns ctx's
// cause and the message may still be published.
func (c *Client) Publish(ctx context.Context, data []byte) error {
	for try := 0; ; try++ {
		t, err := c.leaderTerm(ctx)
		if err != nil {
			return err
		}
		if len(data) > t.info.Max {
			return fmt.Errorf("%w: %d bytes, the limit is %d", lrbus.ErrTooLarge, len(data), t.info.Max)
		}
		ok, err := c.publishTo(ctx, t, data)
		if err != nil || ok {
			return err
		}
		if try == 9 {
			return fmt.Errorf("%w: the term ended ten times before the message was committed; it was not published", lrbus.ErrLeaderChanged)
		}
		if err := c.waitGone(ctx, t); err != nil {
			return err
		}
	}
}

// publishTo puts data into t's channel if t still lasts; ok false means
// it had ended and nothing was written.
func (c *Client) publishTo(ctx context.Context, t *busTerm, data []byte) (bool, error) {
	resp, err := c.l.Client().Txn(ctx).If(t.guards()...).
		Then(clientv3.OpPut(t.busKey, encodeMsg(0, c.pid, data), clientv3.WithIgnoreLease())).Commit()
	if err != nil {
		return false, sendErr(ctx, err)
	}
	return resp.Succeeded, nil
}

func sendErr(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case tooLarge(err):
		return fmt.Errorf("%w: etcd refused it: %w", lrbus.ErrTooLarge, err)
	}
	return fmt.Errorf("%w: etcd: %w", lrbus.ErrLeaderChanged, err)
}

// Request sends data to the leader's handler and returns its reply. It
// fails as Publish does, with lrbus.ErrNoHandler when the leader handles no
// requests, an error matching lrbus.ErrHandler with the handler's error
// text, and lrbus.ErrLeaderChanged when the term ends before the reply: the
// handler may or may not have run. The request's key is deleted once
// answered or abandoned.
func (c *Client) Request(ctx context.Context, data []byte) ([]byte, error) {
	for try := 0; ; try++ {
		t, err := c.leaderTerm(ctx)
		if err != nil {
			return nil, err
		}
		switch {
		case !t.info.Handler:
			return nil, lrbus.ErrNoHandler
		case len(data) > t.info.Max:
			return nil, fmt.Errorf("%w: %d bytes, the limit is %d", lrbus.ErrTooLarge, len(data), t.info.Max)
		}
		s, err := c.l.Session(ctx)
		if err != nil {
			return nil, c.l.RPCErr(ctx, err)
		}
		key := t.reqDir + s.NextID()
		p := &pendingReq{term: t, done: make(chan struct{})}
		c.mu.Lock()
		if c.term != t {
			c.mu.Unlock()
			continue
		}
		c.pending[key] = p
		c.mu.Unlock()
		resp, err := c.l.Client().Txn(ctx).If(t.guards()...).
			Then(clientv3.OpPut(key, encodeReq(c.pid, c.uid, data), clientv3.WithLease(s.ID()))).Commit()
		switch {
		case err != nil && errors.Is(err, rpctypes.ErrLeaseNotFound) && try < 2:
			c.forget(key, -1, s)
			s.End(fmt.Errorf("%w: lease %x is gone", elect.ErrSessionLost, int64(s.ID())))
			continue
		case err != nil:
			c.forget(key, 0, s)
			return nil, sendErr(ctx, err)
		case !resp.Succeeded:
			c.forget(key, -1, s)
			if try == 9 {
				return nil, fmt.Errorf("%w: the term ended ten times before the request was committed; it was not sent", lrbus.ErrLeaderChanged)
			}
			if err := c.waitGone(ctx, t); err != nil {
				return nil, err
			}
			continue
		}
		rev := resp.Header.Revision
		c.mu.Lock()
		p.rev = rev
		c.mu.Unlock()
		select {
		case <-p.done:
			c.forget(key, rev, s)
			return p.reply, p.err
		case <-ctx.Done():
			c.forget(key, rev, s)
			return nil, context.Cause(ctx)
		case <-c.ctx.Done():
			c.forget(key, rev, s)
			return nil, lrbus.ErrClosed
		}
	}
}

// forget stops waiting for key and deletes it: guarded by its creation
// revision rev, by name when rev is 0 (unknown outcome; ids are never
// reused), not at all when rev is -1 (nothing was written). When etcd
// cannot be reached the deletion is retried while the session lives; the
// key goes with the session's lease anyway.
func (c *Client) forget(key string, rev int64, s seam.Session) {
	c.mu.Lock()
	delete(c.pending, key)
	// Close waits for the first attempt; Add under the lock that Close
	// takes before it waits, so that it happens before the Wait or not
	// at all (sync.WaitGroup's rule).
	tracked := !c.closed && rev >= 0
	if tracked {
		c.bg.Add(1)
	}
	c.mu.Unlock()
	if rev < 0 {
		return
	}
	del := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		txn := c.l.Client().Txn(ctx)
		if rev > 0 {
			txn = txn.If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev))
		}
		_, err := txn.Then(clientv3.OpDelete(key)).Commit()
		return err
	}
	go func() {
		err := del()
		if tracked {
			c.bg.Done()
		}
		for i := 1; err != nil && s.Alive(); i++ {
			sleep(s.Context(), min(time.Duration(i)*100*time.Millisecond, time.Second))
			err = del()
		}
	}()
}

// Close ends the membership: Events is closed, and waiting calls return
// lrbus.ErrClosed. It is idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.signal()
		c.mu.Unlock()
		c.cancel()
		c.unhook()
		<-c.loopDone
		<-c.outDone
		c.bg.Wait()
	})
	return nil
}

// leaderTerm is the term serving now, waiting for one with WaitForLeader.
func (c *Client) leaderTerm(ctx context.Context) (*busTerm, error) {
	for {
		c.mu.Lock()
		if c.closed || (c.ctx != nil && c.ctx.Err() != nil) {
			c.mu.Unlock()
			return nil, lrbus.ErrClosed
		}
		if c.term != nil {
			t := c.term
			c.mu.Unlock()
			return t, nil
		}
		if !c.o.WaitForLeader {
			c.mu.Unlock()
			return nil, fmt.Errorf("%w: %s", lrbus.ErrNoLeader, c.name)
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// waitGone waits until the client has seen t end: etcd refused a write
// guarded by t, so the watch is about to tell.
func (c *Client) waitGone(ctx context.Context, t *busTerm) error {
	for {
		c.mu.Lock()
		if c.term != t || c.closed {
			c.mu.Unlock()
			return nil
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// signal wakes the waiters for a change; c.mu is held.
func (c *Client) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// run follows the name: one watch from the last revision applied; when
// it fails the watch resumes from there, and when etcd compacted that
// history the client reads the present and reports what it lost.
func (c *Client) run() {
	defer close(c.loopDone)
	resync := false
	fails := 0
	for c.ctx.Err() == nil {
		c.mu.Lock()
		hold := c.hold
		c.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-c.ctx.Done():
				return
			}
		}
		if fails > 0 {
			sleep(c.ctx, min(time.Duration(fails)*50*time.Millisecond, time.Second))
		}
		if resync {
			if err := c.resync(); err != nil {
				fails++
				continue
			}
			resync = false
		}
		c.mu.Lock()
		rev := c.rev
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(c.ctx))
		c.wcancel = cancel
		c.mu.Unlock()
		for wr := range c.l.Client().Watch(wctx, c.base, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
			if wr.CompactRevision != 0 {
				resync = true
				break
			}
			if wr.Err() != nil || wr.Canceled {
				break
			}
			c.apply(wr.Events)
			fails = 0
		}
		cancel()
		fails++
	}
}

// cutWatch ends the current watch, as a lost connection would; tests
// use it with hold.
func (c *Client) cutWatch() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wcancel != nil {
		c.wcancel()
	}
}

// apply takes the events of the name's watch, in revision order: leader
// changes, messages and replies.
func (c *Client) apply(evs []*clientv3.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	for _, ev := range evs {
		c.rev = max(c.rev, ev.Kv.ModRevision)
		if c.applyTerm(ev) {
			changed = true
		}
		c.applyReply(ev)
	}
	if changed {
		c.signal()
	}
}

// applyTerm applies ev to the term followed: a new serve key begins a
// term, the end of the term's keys or a later steal ends it, a put of its
// channel is a message. It reports whether the term changed; c.mu is
// held.
func (c *Client) applyTerm(ev *clientv3.Event) bool {
	kv := ev.Kv
	k := string(kv.Key)
	rest := strings.TrimPrefix(k, c.base)
	put := ev.Type == mvccpb.PUT
	t := c.term
	switch {
	case put && kv.Version == 1 && strings.HasPrefix(rest, dirServe):
		return c.served(kv)
	case t == nil:
	case !put && (k == t.serveKey || k == t.info.Held),
		put && kv.Version == 1 && strings.HasPrefix(rest, seam.DirSteal) && kv.CreateRevision > t.info.GrantRev:
		c.lose()
		return true
	case put && k == t.busKey:
		c.message(t, kv)
	}
	return false
}

// served begins the term of a new serve key, ending the one followed (one
// exclusive holder at a time: ours has ended); c.mu is held.
func (c *Client) served(kv *mvccpb.KeyValue) bool {
	info, ok := parseServing(kv.Value)
	if !ok {
		return false
	}
	if c.term != nil {
		c.lose()
	}
	c.begin(newBusTerm(c.base, info, kv.CreateRevision), 0, false)
	return true
}

// message delivers the message that a put of t's channel carries, with
// Gap when one went missing before it; c.mu is held.
func (c *Client) message(t *busTerm, kv *mvccpb.KeyValue) {
	seq := uint64(kv.Version - 1)
	if seq == 0 || seq <= c.lastSeq {
		return
	}
	flags, pid, data, ok := decodeMsg(kv.Value)
	gap := c.gap || seq != c.lastSeq+1 || flags&msgGap != 0
	c.lastSeq = seq
	if !ok {
		c.gap = true
		return
	}
	c.gap = false
	c.emit(lrbus.Event{Kind: lrbus.EventMessage, Gap: gap,
		Message: lrbus.Message{Epoch: t.info.Epoch, Seq: seq, PID: pid, Data: append([]byte(nil), data...)}})
}

// applyReply ends a pending request whose key ev answers (its second
// version) or deletes (the server withdrew it); c.mu is held.
func (c *Client) applyReply(ev *clientv3.Event) {
	k := string(ev.Kv.Key)
	if !strings.HasPrefix(strings.TrimPrefix(k, c.base), dirReq) {
		return
	}
	p := c.pending[k]
	switch {
	case p == nil:
	case ev.Type == mvccpb.PUT && ev.Kv.Version >= 2:
		p.finish(decodeReply(ev.Kv.Value))
	case ev.Type != mvccpb.PUT:
		p.finish(nil, fmt.Errorf("%w: the request was withdrawn as the leader stopped serving", lrbus.ErrLeaderChanged))
	}
}

// begin makes t the term followed, whose messages up to seq are behind;
// c.mu is held.
func (c *Client) begin(t *busTerm, seq uint64, gap bool) {
	c.term, c.lastSeq = t, seq
	gap = gap || c.gap
	c.gap = false
	c.emit(lrbus.Event{Kind: lrbus.EventLeader, Leader: t.leader(), Gap: gap})
}

// lose ends the term followed; c.mu is held.
func (c *Client) lose() {
	t := c.term
	c.term = nil
	c.emit(lrbus.Event{Kind: lrbus.EventLost, Leader: t.leader(), Err: lrbus.ErrLeaderGone})
	for _, p := range c.pending {
		if p.term == t {
			p.finish(nil, fmt.Errorf("%w: the term of epoch %d ended before the reply", lrbus.ErrLeaderChanged, t.info.Epoch))
		}
	}
}

// resync reads the present after etcd compacted the history the watch
// needed, and reports what was lost: a term that ended meanwhile, a new
// one that had published already, or messages of the term followed.
func (c *Client) resync() error {
	ctx, cancel := context.WithTimeout(c.ctx, busRoundTrip)
	defer cancel()
	snap, err := c.read(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.term; old != nil && (snap.term == nil || snap.term.serveRev != old.serveRev) {
		c.lose()
		c.gap = true // its last messages may be lost
	}
	switch {
	case snap.term != nil && c.term == nil:
		c.begin(snap.term, snap.seq, snap.seq > 0)
	case snap.term != nil && snap.seq > c.lastSeq:
		c.gap, c.lastSeq = true, snap.seq
	}
	for k, p := range c.pending {
		kv, ok := snap.reqs[k]
		switch {
		case ok && kv.Version >= 2:
			p.finish(decodeReply(kv.Value))
		case !ok && p.rev != 0 && p.rev <= snap.rev:
			p.finish(nil, fmt.Errorf("%w: the request was withdrawn as the leader stopped serving", lrbus.ErrLeaderChanged))
		}
	}
	c.rev = snap.rev
	c.signal()
	return nil
}

// busSnap is the bus of a name read at one revision.
type busSnap struct {
	rev  int64
	term *busTerm // the term serving, if any
	seq  uint64   // its last message's
	reqs map[string]*mvccpb.KeyValue
}

// read reads who serves the name, and this client's pending requests, at
// one revision.
func (c *Client) read(ctx context.Context) (busSnap, error) {
	ops := []clientv3.Op{
		clientv3.OpGet(c.base+dirServe, clientv3.WithPrefix()),
		clientv3.OpGet(c.base+dirBus, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(c.base+seam.DirHeld, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(c.base+seam.DirSteal, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	}
	c.mu.Lock()
	for k := range c.pending {
		if len(ops) < 100 { // etcd's default --max-txn-ops is 128
			ops = append(ops, clientv3.OpGet(k))
		}
	}
	c.mu.Unlock()
	resp, err := c.l.Client().Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return busSnap{}, err
	}
	kvs := func(i int) []*mvccpb.KeyValue { return resp.Responses[i].GetResponseRange().Kvs }
	snap := busSnap{rev: resp.Header.Revision, reqs: map[string]*mvccpb.KeyValue{}}
	helds := map[string]int64{}
	for _, kv := range kvs(2) {
		helds[string(kv.Key)] = kv.CreateRevision
	}
	var lastSteal int64
	for _, kv := range kvs(3) {
		lastSteal = max(lastSteal, kv.CreateRevision)
	}
	versions := map[string]int64{}
	for _, kv := range kvs(1) {
		versions[string(kv.Key)] = kv.Version
	}
	for _, kv := range kvs(0) {
		info, ok := parseServing(kv.Value)
		if !ok || helds[info.Held] != info.GrantRev || lastSteal > info.GrantRev {
			continue
		}
		t := newBusTerm(c.base, info, kv.CreateRevision)
		v, ok := versions[t.busKey]
		if !ok || v < 1 || (snap.term != nil && snap.term.info.Epoch > info.Epoch) {
			continue
		}
		snap.term, snap.seq = t, uint64(v-1)
	}
	for i := 4; i < len(resp.Responses); i++ {
		for _, kv := range kvs(i) {
			snap.reqs[string(kv.Key)] = kv
		}
	}
	return snap, nil
}

// emit queues ev for Events; c.mu is held. Messages beyond the buffer
// are dropped and flag the next delivered message or leader as a gap.
func (c *Client) emit(ev lrbus.Event) {
	switch {
	case ev.Kind == lrbus.EventMessage && c.o.PublishOnly:
		return
	case ev.Kind == lrbus.EventMessage && c.qMsgs >= c.o.EventBuffer:
		c.gap = true
		return
	case ev.Kind == lrbus.EventMessage:
		c.qMsgs++
	case c.o.PublishOnly && len(c.q) >= 64:
		c.q = c.q[1:] // nobody reads them: keep the latest
	}
	c.q = append(c.q, ev)
	select {
	case c.qWake <- struct{}{}:
	default:
	}
}

func (c *Client) deliver() {
	defer close(c.outDone)
	defer close(c.out)
	for {
		c.mu.Lock()
		for len(c.q) == 0 {
			c.mu.Unlock()
			select {
			case <-c.qWake:
			case <-c.ctx.Done():
				return
			}
			c.mu.Lock()
		}
		ev := c.q[0]
		c.q[0] = lrbus.Event{}
		c.q = c.q[1:]
		if ev.Kind == lrbus.EventMessage {
			c.qMsgs--
		}
		c.mu.Unlock()
		select {
		case c.out <- ev:
		case <-c.ctx.Done():
			return
		}
	}
}
