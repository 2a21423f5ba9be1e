package cmd

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/supervise"
	"github.com/urfave/cli/v3"
)

// The default action: open the backend, then, term after term, wait in
// line (run_wait.go), lead (run_lead.go) and end with an outcome
// (run_outcome.go).

func runAction(ctx context.Context, c *cli.Command) error {
	if c.Bool("single-instance") {
		return singleAction(ctx, c) // single.go
	}
	o, err := runOptionsFrom(c)
	if err != nil {
		return err
	}
	return o.run(ctx)
}

func (o *runOptions) run(ctx context.Context) error {
	// Registered before the request (by Main from its start, see
	// catchEarly, or here; acquire waits for it), so that a signal is never
	// lost and never kills leaderrun while it waits or COMMAND runs.
	sigs := o.early.channel()
	if !o.exits {
		defer signal.Stop(sigs) // a process that exits next is spared it
	}
	// Deferred first, so it runs last: told anyway when nothing said it
	// earlier (a signal, the end of the term).
	defer o.notify.stopping()

	lk, err := o.open()
	if err != nil {
		return o.explain(err)
	}
	defer lk.Close()
	o.notify.started()
	if err := o.fitGrace(lk); err != nil {
		return err
	}
	dir, err := filepath.Abs(lk.Dir())
	if err != nil {
		dir = lk.Dir()
	}
	if pid, ok := nestedIn(dir, o.name); ok {
		return exitf(ExitUsage, "leaderrun: %s is already held by this command's own leaderrun (pid %d), so it would wait for itself for ever; run the inner command directly, or give it another --name", o.name, pid)
	}

	if o.req.Steal {
		o.warnExternal(lk)
	}
	defer func() { o.prepared.Close() }() // made while waiting, not used
	for {
		lead, err := o.acquire(ctx, lk, sigs)
		if err != nil {
			return err
		}
		again, err := o.term(ctx, lk, dir, lead, sigs)
		if !again {
			return err
		}
		// A backend whose terms can be lost (etcd, PostgreSQL: a
		// quorum lost, a session ended) lost this one before COMMAND
		// started: nothing ran, so queue again rather than leave the
		// name to nobody.
		o.logf("lost the term of %s before COMMAND started (%v); queueing again", o.name, rootCause(context.Cause(lead.Context())))
	}
}

// term is one term of lead: its fence and marker, the bus, and COMMAND
// for as long as the term lasts. again says that the term was lost (as
// acquire's lostPlace) before COMMAND ever started: the caller queues
// again (found by the etcd module's TestQuorumLossWaiters: 1 or 2 of 20
// waiters exited 80 so).
func (o *runOptions) term(ctx context.Context, lk *opened, dir string, lead *elect.Leadership, sigs <-chan os.Signal) (again bool, err error) {
	o.commandStarted = false
	defer func() {
		again = err != nil && !o.commandStarted && !o.req.IfAvailable && lostPlace(context.Cause(lead.Context()))
	}()
	// Deferred first, so it runs last; and only after lead returns,
	// which is after COMMAND is stopped.
	defer lead.Release()
	o.logf("leading %s (epoch %d, %s)", o.name, lead.Epoch(), lead.Mode())
	o.notify.leading(o.name, lead.Epoch())
	// Deferred after lead.Release, so it runs before it: the marker goes
	// only once COMMAND has been stopped.
	prepared := o.prepared // made while waiting; the term takes it
	o.prepared = nil
	tm := supervise.Begin(ctx, lead, dir, prepared)
	defer tm.End()
	if err := tm.Expire(lk.termToken(lead), lead, o.grace); err != nil {
		if errors.Is(err, supervise.ErrNoWatchdog) {
			err = exitf(ExitOSErr, "leaderrun: %v; COMMAND was not started", err)
		}
		return false, err
	}

	// An exclusive leader serves NAME's bus, for publish, subscribe and
	// --fanout; it stops serving (deferred later, so earlier) before it
	// releases the lock. With --fanout it listens before COMMAND starts;
	// otherwise once COMMAND has run busDelay, so that a COMMAND over
	// sooner (leaderrun -- true) never makes a socket nobody dials.
	// Members wait for the socket (subscribe), and so does a publish that
	// finds the name led by a leaderrun that does not serve yet. Over a
	// backend whose waiters on this host end a dead holder's term (etcd,
	// PostgreSQL), they learn of the holder from its bus: it is served
	// at once there too.
	var srv BusServer
	var stopServing func()
	if _, _, endsHolders := lk.holderEnder(); o.fanout || endsHolders {
		srv, stopServing = o.serveBus(lk.bus(), lead)
	} else {
		stopServing = o.serveBusLater(lk.bus(), lead, busDelay)
	}
	defer stopServing()
	return false, o.lead(lead, tm, dir, srv, sigs)
}

// busDelay is how long COMMAND runs before its leader serves the bus,
// without --fanout.
const busDelay = 20 * time.Millisecond

// serveBusLater serves the bus as serveBus does, from d on; stop ends
// it, or stops it from starting, and returns once it has ended.
func (o *runOptions) serveBusLater(b busPort, lead *elect.Leadership, d time.Duration) (stop func()) {
	var mu sync.Mutex
	stopped := false
	stopNow := func() {}
	t := time.AfterFunc(d, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			_, stopNow = o.serveBus(b, lead)
		}
	})
	return func() {
		t.Stop()
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		stopNow()
	}
}

// serveBus serves NAME's bus for an exclusive leadership; srv is nil
// when it does not. stop ends the serving and returns once it has ended.
func (o *runOptions) serveBus(b busPort, lead *elect.Leadership) (srv BusServer, stop func()) {
	if lead.Mode() != elect.Exclusive {
		return nil, func() {}
	}
	srv, err := b.ListenBus(lead)
	if err != nil {
		// The cause only: the error names the socket by its internal,
		// descriptor-relative path (/proc/self/fd/N/NAME.sock.tmp).
		o.logf("not serving the bus of %s: %v", o.name, rootCause(err))
		return nil, func() {}
	}
	// Stopped through Serve's ctx, not Close: Close racing a Serve that
	// has not started yet trips the race detector (WaitGroup Add
	// concurrent with Wait) in bus.
	bctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(bctx)
	}()
	return srv, func() {
		cancel()
		<-served
	}
}
