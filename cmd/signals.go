package cmd

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/supervise"
)

// stopSignals end publish, subscribe, who and status at once, with
// 128+N.
var stopSignals = supervise.TerminatingSignals()

// signalContext is a context cancelled, with cause signalled{sig}, by the
// first of stopSignals. It does not follow ctx's cancellation, which main
// ties to SIGINT and SIGTERM too: whichever saw the signal first would
// decide the cause, and the exit code must name the signal.
func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	sctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, stopSignals...)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			cancel(signalled{s})
		case <-done:
		}
	}()
	return sctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(context.Canceled)
	}
}

// caught is what a line that runs COMMAND catches from Main's start
// (catchEarly): the forwarded signals, on sigs, once ready is closed.
type caught struct {
	sigs  chan os.Signal
	ready chan struct{}
}

// catchEarly registers, on a goroutine of its own, what a line that runs
// COMMAND catches: SIGINT and SIGTERM, which end the context returned (as
// signal.NotifyContext's would), and the forwarded signals that were not
// ignored when leaderrun started, for the run (or single instance) to
// take from c.sigs. os/signal enables each signal in a round trip with
// the runtime's signal thread, 0.75 ms for the six here, which so runs
// beside the parse and the term's preparation instead of before them.
// The request waits for ready (run.go): a signal that arrives once the
// instance stands in line is never taken by its default action. Until
// then a signal acts as it does before main: it ends leaderrun, which
// holds nothing the kernel does not drop and has made nothing that its
// successors do not sweep (a ticket, an empty cgroup, a watchdog that
// exits with it).
func catchEarly() (context.Context, context.CancelFunc, *caught) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &caught{sigs: make(chan os.Signal, 8), ready: make(chan struct{})}
	go func() {
		stop := make(chan os.Signal, 1)
		// In NotifyContext's order: ignored only after SIGINT and
		// SIGTERM are caught, as a run has always seen it.
		signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
		notifyForwarded(c.sigs)
		close(c.ready)
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel, c
}

// notifyForwarded relays to ch the forwarded signals but those ignored
// when leaderrun started (nohup's SIGHUP), which stay ignored, for
// leaderrun and so for COMMAND.
func notifyForwarded(ch chan os.Signal) {
	for _, s := range supervise.Forwarded() {
		if !signal.Ignored(s) {
			signal.Notify(ch, s)
		}
	}
}

// channel returns the channel of the forwarded signals caught early, which
// they reach once wait returns; where nothing was caught early (a nil c:
// the App was not run by Main) a channel they reach at once.
func (c *caught) channel() chan os.Signal {
	if c == nil {
		ch := make(chan os.Signal, 8)
		notifyForwarded(ch)
		return ch
	}
	return c.sigs
}

// wait returns once the signals are caught.
func (c *caught) wait() {
	if c != nil {
		<-c.ready
	}
}

// take is channel once the signals are caught.
func (c *caught) take() chan os.Signal {
	c.wait()
	return c.channel()
}

// signalExit is the exit for a ctx ended by a signal (128+N), or nil.
func signalExit(ctx context.Context) error {
	var s signalled
	if errors.As(context.Cause(ctx), &s) {
		return silentExit(ExitSignalBase + supervise.SignalNumber(s.sig))
	}
	return nil
}

// queryUntil is query, returning as soon as ctx ends. Query can block in
// a system call that no context reaches (elect opening a FIFO planted in
// the queue directory): the command then still ends on a signal, and the
// stuck call goes with the process.
func queryUntil(ctx context.Context, query func(context.Context) (elect.Snapshot, error)) (elect.Snapshot, error) {
	type answer struct {
		snap elect.Snapshot
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		snap, err := query(ctx)
		ch <- answer{snap, err}
	}()
	select {
	case a := <-ch:
		return a.snap, a.err
	case <-ctx.Done():
		return elect.Snapshot{}, context.Cause(ctx)
	}
}
