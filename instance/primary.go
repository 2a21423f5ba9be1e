package instance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
)

// Primary is the process that holds the name. It receives every
// invocation, its own first, on Invocations.
type Primary struct {
	lead   *elect.Leadership
	srv    *bus.Server
	ch     chan *Invocation
	manual bool

	mu       sync.Mutex
	invs     map[string]*invState // by id, until read to the end
	finished map[string]*invState // done and read, kept to answer retries
	order    []string             // finished ids, oldest first
	closed   bool
	drained  chan struct{} // closed once closed and every delivered invocation is read to the end
	stopping chan struct{} // closed by close: deliveries in flight give up
	sending  sync.WaitGroup
	ownTaken chan struct{}
	parts    map[string]*partial // submits arriving in parts, by id
	partsLen int                 // their bytes, together
}

// keepFinished bounds how many finished invocations a primary remembers,
// to answer a retry of one of them without running it again.
const keepFinished = 4096

func newPrimary(lead *elect.Leadership) *Primary {
	return &Primary{lead: lead, ch: make(chan *Invocation), invs: map[string]*invState{}, finished: map[string]*invState{}, ownTaken: make(chan struct{}), drained: make(chan struct{}), stopping: make(chan struct{})}
}

// Invocations delivers invocations one at a time, the primary's own
// (Local) first. Taking one is what accepts it: a caller whose invocation
// is not taken within its AckTimeout reports the primary as not
// responding. The channel is never closed; select on the primary's ctx.
func (p *Primary) Invocations() <-chan *Invocation { return p.ch }

// Leadership is the primary's term of the name's lock.
func (p *Primary) Leadership() *elect.Leadership { return p.lead }

// Server is the primary's bus server, for publishing to members.
func (p *Primary) Server() *bus.Server { return p.srv }

// deliverOwn hands the local invocation to the application first.
func (p *Primary) deliverOwn(ctx context.Context, inv *Invocation) {
	defer close(p.ownTaken)
	select {
	case p.ch <- inv:
	case <-ctx.Done():
	}
}

// handle answers the bus requests of callers.
func (p *Primary) handle(ctx context.Context, req bus.Request) ([]byte, error) {
	r, err := decodeRequest(req.Data)
	if err != nil {
		return nil, err
	}
	var rep wireReply
	switch r.Op {
	case opSubmit:
		rep, err = p.submit(ctx, r, req)
	case opWait:
		rep, err = p.wait(ctx, r)
	case opStdin:
		err = p.stdin(ctx, r)
	case opPart:
		var whole []byte
		if whole, err = p.part(ctx, r); err == nil && whole != nil {
			var sub wireRequest
			if sub, err = decodeRequest(whole); err == nil && (sub.Op != opSubmit || sub.ID != r.ID) {
				err = fmt.Errorf("instance: the parts of %s do not make its submit", r.ID)
			}
			if err == nil {
				rep, err = p.submit(ctx, sub, req)
			}
		}
	default:
		return nil, fmt.Errorf("instance: unknown request %d", r.Op)
	}
	if err != nil {
		return nil, err
	}
	return rep.encode(), nil
}

// partial is a submit arriving in parts on one connection (conn is its
// handlers' ctx).
type partial struct {
	conn context.Context
	b    []byte
}

// part adds a piece of a submit sent in parts; with the last one it
// returns the whole submit. The pieces come in order on one connection;
// those of a connection that ends before the last are dropped, and a
// submit of the same id begun on another connection starts afresh. All
// the submits arriving at once hold at most 4*maxSubmit bytes.
func (p *Primary) part(ctx context.Context, r wireRequest) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	drop := func(pt *partial) {
		if p.parts[r.ID] == pt {
			p.partsLen -= len(pt.b)
			delete(p.parts, r.ID)
		}
	}
	pt := p.parts[r.ID]
	if pt != nil && pt.conn != ctx {
		drop(pt)
		pt = nil
	}
	if pt == nil {
		if p.parts == nil {
			p.parts = map[string]*partial{}
		}
		pt = &partial{conn: ctx}
		p.parts[r.ID] = pt
		id := r.ID
		context.AfterFunc(ctx, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.parts[id] == pt {
				p.partsLen -= len(pt.b)
				delete(p.parts, id)
			}
		})
	}
	if len(pt.b)+len(r.Data) > maxSubmit || p.partsLen+len(r.Data) > 4*maxSubmit {
		drop(pt)
		return nil, fmt.Errorf("instance: invocation %s is larger than %d bytes (arguments, working directory and variables)", r.ID, maxSubmit)
	}
	pt.b = append(pt.b, r.Data...)
	p.partsLen += len(r.Data)
	if !r.EOF {
		return nil, nil
	}
	drop(pt)
	return pt.b, nil
}

var errNotTaken = errors.New("instance: the primary did not take the invocation in time")

func (p *Primary) submit(ctx context.Context, r wireRequest, req bus.Request) (wireReply, error) {
	st, known, rep, done, err := p.register(ctx, r.ID)
	if done {
		return rep, err
	}
	var deadline <-chan time.Time
	if r.Deadline > 0 {
		t := time.NewTimer(time.Until(time.Unix(0, r.Deadline)))
		defer t.Stop()
		deadline = t.C
	}
	if known {
		// A retry of an invocation being delivered or delivered already.
		select {
		case <-st.accepted:
			return wireReply{Accepted: true}, nil
		case <-ctx.Done():
			return wireReply{}, ctx.Err()
		case <-deadline:
			return wireReply{}, errNotTaken
		}
	}
	if err := p.deliver(ctx, newInvocation(r, req, st), deadline); err != nil {
		p.mu.Lock()
		delete(p.invs, r.ID)
		p.mu.Unlock()
		if errors.Is(err, errStopping) {
			// Hold the caller until the server closes, as register does.
			<-ctx.Done()
		}
		return wireReply{}, err
	}
	// Let the application run first, once: one that answers at once then
	// costs its caller one round trip, not two. Nothing waits for it: the
	// first phase is not delayed.
	runtime.Gosched()
	rep, _ = st.chunk(0, 0)
	rep.Accepted = true
	if rep.Done {
		context.AfterFunc(ctx, func() { p.retire(st) })
	}
	return rep, nil
}

// register finds or records the invocation id: known says a submit of it
// came before (a retry). done says the submit is over already, with rep
// and err: finished, or the application has returned.
func (p *Primary) register(ctx context.Context, id string) (st *invState, known bool, rep wireReply, done bool, err error) {
	p.mu.Lock()
	if _, ok := p.finished[id]; ok {
		p.mu.Unlock()
		return nil, false, wireReply{Accepted: true}, true, nil
	}
	st, known = p.invs[id]
	if !known && p.closed {
		// The application has returned: nobody will take it. Hold the
		// caller until the server closes (it then tries the next
		// primary, or becomes it) rather than have it call again at once.
		p.mu.Unlock()
		<-ctx.Done()
		return nil, false, wireReply{}, true, errStopping
	}
	if !known {
		st = newInvState(id)
		p.invs[id] = st
		// Counted under the lock that close takes first, so that close
		// waits for every delivery that may have reached the
		// application before it decides who still needs an answer.
		p.sending.Add(1)
	}
	p.mu.Unlock()
	return st, known, wireReply{}, false, nil
}

// newInvocation is the application's view of the submitted r.
func newInvocation(r wireRequest, req bus.Request, st *invState) *Invocation {
	inv := &Invocation{ID: r.ID, Cwd: string(r.Cwd), PID: req.PID, UID: req.UID, st: st, Deadline: time.Unix(0, r.Deadline),
		Stdout: stream{s: st}, Stderr: stream{s: st, err: true}}
	inv.Args = make([][]byte, len(r.Args))
	for i, a := range r.Args {
		inv.Args[i] = append([]byte{}, a...)
	}
	for _, e := range r.Env {
		inv.Env = append(inv.Env, string(e))
	}
	if r.Stdin {
		pr, pw := io.Pipe()
		inv.Stdin, st.stdinW = pr, pw
	}
	return inv
}

var errStopping = errors.New("instance: the primary is ending")

// deliver hands inv to the application, after its own invocation.
func (p *Primary) deliver(ctx context.Context, inv *Invocation, deadline <-chan time.Time) error {
	defer p.sending.Done()
	select {
	case <-p.ownTaken:
	case <-p.stopping:
		return errStopping
	case <-ctx.Done():
		return ctx.Err()
	case <-deadline:
		return errNotTaken
	}
	select {
	case p.ch <- inv:
		if !p.manual {
			inv.st.accept()
			return nil
		}
	case <-p.stopping:
		return errStopping
	case <-ctx.Done():
		return ctx.Err()
	case <-deadline:
		return errNotTaken
	}
	// The application has it and accepts it itself, in time or never.
	var err error
	select {
	case <-inv.st.accepted:
		return nil
	case <-p.stopping:
		err = errStopping
	case <-ctx.Done():
		err = ctx.Err()
	case <-deadline:
		err = errNotTaken
	}
	if !inv.st.refuse() {
		return nil // accepted as the wait ended
	}
	return err
}

func (p *Primary) wait(ctx context.Context, r wireRequest) (wireReply, error) {
	p.mu.Lock()
	st := p.invs[r.ID]
	if st == nil {
		st = p.finished[r.ID]
	}
	p.mu.Unlock()
	if st == nil {
		return wireReply{}, fmt.Errorf("instance: unknown invocation %s", r.ID)
	}
	for {
		rep, changed := st.chunk(r.Out, r.Err)
		if rep.Done {
			// Forgotten once the caller hangs up (ctx ends then), not
			// now: the reply is not sent yet, and a primary that has
			// returned keeps serving until its callers have theirs.
			context.AfterFunc(ctx, func() { p.retire(st) })
			return rep, nil
		}
		if len(rep.Out) > 0 || len(rep.Err) > 0 {
			return rep, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return wireReply{}, ctx.Err()
		}
	}
}

// stdin hands a piece of the caller's stdin to the application, and
// returns once it has been read (the caller sends the next piece only
// then: the application's reading paces it).
func (p *Primary) stdin(ctx context.Context, r wireRequest) error {
	p.mu.Lock()
	st := p.invs[r.ID]
	p.mu.Unlock()
	if st == nil || st.stdinW == nil {
		return fmt.Errorf("instance: no invocation %s reading stdin", r.ID)
	}
	if len(r.Data) > 0 {
		done := make(chan error, 1)
		go func() {
			_, err := st.stdinW.Write(r.Data)
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			st.stdinW.CloseWithError(ctx.Err())
			return ctx.Err()
		}
	}
	if r.EOF {
		st.stdinW.Close()
	}
	return nil
}

// retire moves a finished invocation, read to the end, to the bounded
// memory of finished ones, dropping its output.
func (p *Primary) retire(st *invState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.invs[st.id]; !ok {
		return
	}
	delete(p.invs, st.id)
	st.mu.Lock()
	st.out, st.err = nil, nil
	st.mu.Unlock()
	p.finished[st.id] = st
	p.order = append(p.order, st.id)
	if len(p.order) > keepFinished {
		delete(p.finished, p.order[0])
		p.order = p.order[1:]
	}
	p.checkDrainedLocked()
}

// checkDrainedLocked closes drained once the primary is closed and no
// delivered invocation waits to be read.
func (p *Primary) checkDrainedLocked() {
	if !p.closed {
		return
	}
	select {
	case <-p.drained:
		return
	default:
	}
	for _, st := range p.invs {
		if st.isAccepted() {
			return
		}
	}
	close(p.drained)
}

// close abandons every invocation that was accepted and is not done, so
// that their callers learn it (ErrAcceptedLost) rather than wait, and
// waits, at most d, for every caller to read its answer: one that got
// "accepted" must also get its result, or it could not tell a lost
// invocation from one that ran.
func (p *Primary) close(d time.Duration) {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	close(p.stopping)
	p.sending.Wait()
	p.mu.Lock()
	var open []*invState
	for _, st := range p.invs {
		if st.isAccepted() {
			open = append(open, st)
		}
	}
	p.checkDrainedLocked()
	p.mu.Unlock()
	for _, st := range open {
		st.finish(-1, true)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.drained:
	case <-t.C:
	}
}
