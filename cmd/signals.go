package cmd

import (
	"context"
	"errors"
	"os"
	"os/signal"

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
