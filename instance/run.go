package instance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/layout"
	"github.com/leaderrun/leaderrun/oslock"
)

// runner is one launch. It queues for the lock and, while it waits,
// tries to hand its invocation to the primary over the bus: whichever
// comes first decides. The lock is exclusive, so two launches in the same
// microsecond still make one primary; a launch that finds the primary
// gone before it accepted is in line to succeed it. The queueing waits
// queueAfter while a primary that serves is asked first: a forward that
// is accepted by then makes and removes nothing in the lock directory
// (a ticket, its beacon and its inbox).
type runner struct {
	name    string
	o       Options
	lk      *elect.Locker
	primary func(context.Context, *Primary) error

	got     chan acquired // the queued Acquire's outcome, sent once
	actx    context.Context
	acancel context.CancelFunc
	taken   bool // got has been read, or no Acquire will send on it

	mu       sync.Mutex
	started  bool        // the Acquire runs (it sends on got)
	stopped  bool        // stopAcquire has begun: start nothing
	queueing *time.Timer // starts the Acquire queueAfter into direct
}

// queueAfter is how long a launch that found a primary serving waits for
// it to accept before it queues as well (so that it is in line should
// that primary end before accepting). A primary accepts in well under a
// millisecond; one that is busy or deaf sees the launch queue after this.
const queueAfter = 5 * time.Millisecond

type acquired struct {
	l   *elect.Leadership
	err error
}

// grace is how long past its deadline a caller waits for an acceptance
// already on its way: the primary delivers nothing after the deadline.
const grace = 250 * time.Millisecond

// drainTimeout bounds how long a primary that has returned keeps serving
// the answers its callers have not read yet.
const drainTimeout = 5 * time.Second

var (
	errRetry  = errors.New("instance: the primary ended before accepting")
	errRedial = errors.New("instance: the primary's socket dropped the connection")
)

func (r *runner) run(ctx context.Context) (Result, error) {
	actx, acancel := context.WithCancel(ctx)
	r.actx, r.acancel = actx, acancel
	defer acancel()
	r.got = make(chan acquired, 1)
	if r.o.ForwardOnly {
		r.taken = true // never sent: this launch does not queue
		return r.loop(ctx)
	}
	defer r.stopAcquire()
	if res, err, done := r.direct(ctx); done {
		return res, err
	}
	r.startAcquire()
	return r.loop(ctx)
}

// startAcquire queues this launch for the lock, once, unless stopAcquire
// has begun.
func (r *runner) startAcquire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started || r.stopped {
		return
	}
	r.started = true
	go func() {
		l, err := r.lk.Acquire(r.actx, r.name, elect.Request{Command: r.o.Command})
		r.got <- acquired{l, err}
	}()
}

func (r *runner) loop(ctx context.Context) (Result, error) {
	var since time.Time // of the first of a run of failed connections
	pause := 5 * time.Millisecond
	for {
		res, err := r.attempt(ctx)
		switch {
		case errors.Is(err, errRetry):
			since = time.Time{}
			continue
		case errors.Is(err, errRedial):
			// A socket that takes connections and drops them: try again
			// with a growing pause, within one AckTimeout.
			if since.IsZero() {
				since = time.Now()
			}
			if time.Since(since) > r.o.AckTimeout {
				return r.notResponding(ctx, 0, time.Since(since))
			}
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return Result{}, ctx.Err()
			case <-t.C:
			}
			pause = min(2*pause, 200*time.Millisecond)
			continue
		}
		return res, err
	}
}

// stopAcquire ends the queued request; a grant that raced with it is
// released (it cannot happen while a primary serves: the lock is
// exclusive).
func (r *runner) stopAcquire() {
	if r.taken {
		return
	}
	r.taken = true
	r.mu.Lock()
	r.stopped = true
	started := r.started
	if r.queueing != nil {
		r.queueing.Stop()
	}
	r.mu.Unlock()
	if !started {
		return
	}
	r.acancel()
	if a := <-r.got; a.err == nil {
		a.l.Release()
	}
}

// direct hands the invocation to the primary that serves now; this
// launch queues only if it has not accepted within queueAfter. done is
// false when none serves (nobody listens, it is stepping down, it hung
// up) or it ended before accepting: the caller then queues, if it has
// not yet, and tries again. A primary that does not answer, or one of
// another user, is reported as attempt reports it.
func (r *runner) direct(ctx context.Context) (res Result, err error, done bool) {
	r.mu.Lock()
	r.queueing = time.AfterFunc(queueAfter, r.startAcquire)
	r.mu.Unlock()
	start := time.Now()
	deadline := start.Add(r.o.AckTimeout)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	c, err := bus.Dial(dctx, r.o.Dir, r.name, bus.PublishOnly())
	if err != nil {
		res, err = r.dialFailed(ctx, dctx, err, start, deadline)
		cancel()
		return res, err, !errors.Is(err, errRedial)
	}
	cancel()
	defer c.Close()
	res, err = r.forward(ctx, c, start, deadline)
	return res, err, !errors.Is(err, errRetry)
}

// dialFailed turns a failed dial into the launch's outcome; errRedial
// when the primary went away meanwhile (or nobody leads).
func (r *runner) dialFailed(ctx, dctx context.Context, err error, start, deadline time.Time) (Result, error) {
	switch {
	case ctx.Err() != nil:
		return Result{}, ctx.Err()
	case errors.Is(err, bus.ErrRefused), errors.Is(err, fs.ErrPermission):
		return r.foreign(ctx, err)
	case dctx.Err() != nil, errors.Is(err, os.ErrDeadlineExceeded), !time.Now().Before(deadline):
		// The handshake itself ran into the deadline: a primary
		// that is stopped does not even say hello.
		return r.notResponding(ctx, 0, time.Since(start))
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, bus.ErrLeaderGone), errors.Is(err, bus.ErrNoLeader):
		// The primary went away while we connected: this launch
		// is in line to succeed it, or the next one serves.
		return Result{}, errRedial
	}
	return Result{}, err
}

type dialed struct {
	c   *bus.Client
	err error
}

// attempt waits, at most AckTimeout, for the lock or for a primary that
// accepts the invocation; errRetry asks for another attempt.
func (r *runner) attempt(ctx context.Context) (Result, error) {
	if r.o.ForwardOnly {
		if h, ok := r.holder(ctx); !ok {
			return Result{}, fmt.Errorf("%w: nobody holds %s in %s", ErrNoPrimary, r.name, r.o.Dir)
		} else if h.External {
			return Result{PID: h.PID}, fmt.Errorf("%w: %s is held by pid %d (%s), which is not a leaderrun client", ErrNotInstance, r.name, h.PID, strings.Join(h.Command, " "))
		}
	}
	start := time.Now()
	deadline := start.Add(r.o.AckTimeout)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	dc := make(chan dialed, 1)
	go func() {
		c, err := bus.Dial(dctx, r.o.Dir, r.name, bus.WaitForLeader(), bus.PublishOnly())
		dc <- dialed{c, err}
	}()
	closeDial := func() {
		cancel()
		if d := <-dc; d.c != nil {
			d.c.Close()
		}
	}
	select {
	case a := <-r.got:
		r.taken = true
		closeDial()
		if a.err != nil {
			return Result{}, a.err
		}
		return r.lead(ctx, a.l)
	case d := <-dc:
		if d.err != nil {
			return r.dialFailed(ctx, dctx, d.err, start, deadline)
		}
		defer d.c.Close()
		return r.forward(ctx, d.c, start, deadline)
	}
}

// forward hands the invocation to the primary c is connected to.
func (r *runner) forward(ctx context.Context, c *bus.Client, start, deadline time.Time) (Result, error) {
	pid := leaderPID(c, 0)
	first, granted, err := r.submitWatching(ctx, c, deadline)
	if granted != nil {
		r.taken = true
		switch {
		case granted.err != nil && err != nil:
			return Result{}, granted.err
		case granted.err == nil && err != nil:
			c.Close()
			return r.lead(ctx, granted.l)
		case granted.err == nil:
			granted.l.Release() // accepted: the invocation is that primary's
		}
	}
	pid = leaderPID(c, pid) // the one that took it, if the first one went
	if err != nil {
		return r.notAccepted(ctx, c, err, pid, start)
	}
	// Accepted: from here on the invocation is the primary's, and this
	// launch never runs it, nor becomes the primary.
	r.stopAcquire()
	if r.o.OnForward != nil {
		r.o.OnForward(pid)
	}
	if r.o.Stdin != nil {
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		go r.sendStdin(sctx, c)
	}
	return r.follow(ctx, c, first, pid)
}

// leaderPID is the pid of the primary c is connected to, or pid between
// primaries.
func leaderPID(c *bus.Client, pid int) int {
	if ld, ok := c.Leader(); ok {
		return ld.PID
	}
	return pid
}

// submitWatching submits the invocation to c's primary. This launch's own
// request for the lock may be granted while it submits (the primary it
// dialed has ended, and the client waits for the next one, which is this
// launch): the submit is then cut short, and the grant returned, for the
// caller to take the lock unless the submit was accepted all the same.
func (r *runner) submitWatching(ctx context.Context, c *bus.Client, deadline time.Time) (first []byte, granted *acquired, err error) {
	cwd, _ := os.Getwd()
	sub := wireRequest{Op: opSubmit, ID: r.o.ID, Args: r.o.Args, Cwd: []byte(cwd), Env: environ(r.o.Env), Deadline: deadline.UnixNano(), Stdin: r.o.Stdin != nil}.encode()
	sctx, cancel := context.WithDeadline(ctx, deadline.Add(grace))
	defer cancel()
	got := make(chan acquired, 1)
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	if r.taken {
		close(watched)
	} else {
		go func() {
			defer close(watched)
			select {
			case a := <-r.got:
				got <- a
				cancel()
			case <-stopWatch:
			}
		}()
	}
	first, err = submit(sctx, c, r.o.ID, sub)
	close(stopWatch)
	<-watched
	select {
	case a := <-got:
		return first, &a, err
	default:
		return first, nil, err
	}
}

// notAccepted is the outcome of a submit that failed with err.
func (r *runner) notAccepted(ctx context.Context, c *bus.Client, err error, pid int, start time.Time) (Result, error) {
	switch {
	case ctx.Err() != nil:
		return Result{}, ctx.Err()
	case errors.Is(err, bus.ErrLeaderChanged), errors.Is(err, bus.ErrNoLeader), errors.Is(err, bus.ErrLeaderGone), errors.Is(err, bus.ErrClosed),
		errors.Is(err, bus.ErrHandler) && strings.Contains(err.Error(), errStopping.Error()):
		// Not accepted: the primary ended, or is ending and took nothing
		// more; the next one (perhaps this launch) takes it.
		return Result{}, errRetry
	case errors.Is(err, bus.ErrNoHandler):
		return Result{}, fmt.Errorf("%w: %s is held by pid %d", ErrNotInstance, r.name, pid)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, bus.ErrHandler) && strings.Contains(err.Error(), errNotTaken.Error()):
		c.Close()
		return r.notResponding(ctx, pid, time.Since(start))
	default:
		return Result{}, err
	}
}

// follow relays the accepted invocation's output, from the reply first
// on, until the primary says it is done, and returns its exit status.
func (r *runner) follow(ctx context.Context, c *bus.Client, first []byte, pid int) (Result, error) {
	var outOff, errOff int64
	for b := first; ; b = nil {
		if b == nil {
			w := wireRequest{Op: opWait, ID: r.o.ID, Out: outOff, Err: errOff}.encode()
			var err error
			if b, err = c.Request(ctx, w); err != nil {
				if ctx.Err() != nil {
					return Result{}, ctx.Err()
				}
				return Result{PID: pid}, fmt.Errorf("%w: %s, pid %d: %w", ErrAcceptedLost, r.name, pid, err)
			}
		}
		rep, err := decodeReply(b)
		if err != nil {
			return Result{PID: pid}, fmt.Errorf("instance: from pid %d: %w", pid, err)
		}
		if len(rep.Out) > 0 {
			r.o.Stdout.Write(rep.Out)
			outOff += int64(len(rep.Out))
		}
		if len(rep.Err) > 0 {
			r.o.Stderr.Write(rep.Err)
			errOff += int64(len(rep.Err))
		}
		if rep.Done {
			if rep.Abandoned {
				return Result{PID: pid}, fmt.Errorf("%w: %s, pid %d, returned without finishing it", ErrAcceptedLost, r.name, pid)
			}
			return Result{Exit: rep.Exit, PID: pid}, nil
		}
	}
}

// submit sends the encoded submit sub, in parts if it is larger than
// one request should be, and returns the primary's reply to it.
func submit(ctx context.Context, c *bus.Client, id string, sub []byte) ([]byte, error) {
	if len(sub) <= partSize {
		return c.Request(ctx, sub)
	}
	for len(sub) > 0 {
		n := min(len(sub), partSize)
		rep, err := c.Request(ctx, wireRequest{Op: opPart, ID: id, Data: sub[:n], EOF: n == len(sub)}.encode())
		if err != nil || n == len(sub) {
			return rep, err
		}
		sub = sub[n:]
	}
	return nil, nil
}

// sendStdin streams Options.Stdin to the primary, a piece at a time; it
// stops when the invocation is done (the primary refuses more).
func (r *runner) sendStdin(ctx context.Context, c *bus.Client) {
	buf := make([]byte, 64<<10)
	for {
		n, err := r.o.Stdin.Read(buf)
		eof := err != nil
		if n > 0 || eof {
			req := wireRequest{Op: opStdin, ID: r.o.ID, Data: buf[:n], EOF: eof}.encode()
			if _, rerr := c.Request(ctx, req); rerr != nil {
				return
			}
		}
		if eof {
			return
		}
	}
}

// notResponding reports the holder that did not accept, or replaces it.
func (r *runner) notResponding(ctx context.Context, pid int, waited time.Duration) (Result, error) {
	e := &NotRespondingError{Name: r.name, PID: pid, State: "unknown", Wait: waited.Round(time.Millisecond)}
	if h, ok := r.holder(ctx); ok && (pid == 0 || h.PID == pid) {
		e.PID, e.State, e.Epoch, e.Since = h.PID, h.State, h.Epoch, h.Since
	}
	if !r.o.Replace {
		return Result{PID: e.PID}, e
	}
	r.stopAcquire()
	l, err := r.lk.Acquire(ctx, r.name, elect.Request{Steal: true, KillAfter: r.o.KillAfter, Command: r.o.Command})
	if err != nil {
		return Result{PID: e.PID}, fmt.Errorf("instance: replacing %v: %w", e, err)
	}
	return r.lead(ctx, l)
}

// foreign reports a primary of another user: the bus refused us, or its
// socket is closed to us.
func (r *runner) foreign(ctx context.Context, err error) (Result, error) {
	who := "a primary"
	pid := 0
	if h, ok := r.holder(ctx); ok {
		pid = h.PID
		who = fmt.Sprintf("the primary of %s, pid %d,", r.name, h.PID)
	}
	if _, uid, serr := oslock.LstatPath(layout.SocketPath(r.o.Dir, r.name)); serr == nil && uid != os.Geteuid() {
		return Result{PID: pid}, fmt.Errorf("%w: %s runs as uid %d, this launch as uid %d", ErrForeign, who, uid, os.Geteuid())
	}
	return Result{PID: pid}, fmt.Errorf("%w: %s refused this launch: %w", ErrForeign, who, err)
}

// holder is the name's exclusive holder, as Query sees it.
func (r *runner) holder(ctx context.Context) (elect.Holder, bool) {
	snap, err := r.lk.Query(ctx, r.name)
	if err != nil {
		return elect.Holder{}, false
	}
	for _, h := range snap.Held {
		if h.Mode == elect.Exclusive {
			return h, true
		}
	}
	return elect.Holder{}, false
}

// lead runs the primary for the term l.
func (r *runner) lead(ctx context.Context, l *elect.Leadership) (Result, error) {
	defer l.Release()
	p := newPrimary(l)
	p.manual = r.o.ManualAccept
	srv, err := bus.Listen(l, bus.WithHandler(p.handle))
	if err != nil {
		return Result{}, err
	}
	p.srv = srv
	lctx, cancel := context.WithCancelCause(l.Context())
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer stop()
	served := make(chan struct{})
	go func() {
		defer close(served)
		// Not lctx: a primary whose ctx ends still answers, while it
		// drains, the callers it accepted (their results), and holds the
		// others until it closes, when they go to the next primary. Only
		// the loss of the lock stops the bus at once.
		srv.Serve(l.Context())
	}()
	cwd, _ := os.Getwd()
	own := &Invocation{ID: r.o.ID, Args: r.o.Args, Cwd: cwd, PID: os.Getpid(), UID: os.Geteuid(), Local: true,
		Stdout: r.o.Stdout, Stderr: r.o.Stderr, Stdin: r.o.Stdin, st: newInvState(r.o.ID)}
	go p.deliverOwn(lctx, own)
	err = r.primary(lctx, p)
	p.close(drainTimeout)
	srv.Close()
	<-served
	own.st.mu.Lock()
	exit := own.st.exit
	own.st.mu.Unlock()
	return Result{Primary: true, Exit: exit, PID: os.Getpid()}, err
}
