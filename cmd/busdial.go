package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
	"github.com/urfave/cli/v2"
)

// stopSignals end publish and subscribe at once, with 128+N.
var stopSignals = terminatingSignals()

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
		return silentExit(ExitSignalBase + signalNumber(s.sig))
	}
	return nil
}

// dialBus is bus.Dial, returning as soon as ctx ends: bus.Dial bounds its
// handshake with its own timeout (5s) rather than ctx, so a stopped
// leader, which accepts the connection in the kernel but never answers,
// would keep a signalled publish or subscribe waiting. A client that
// arrives after ctx ended is closed.
func dialBus(ctx context.Context, dir, name string, opts ...bus.DialOption) (*bus.Client, error) {
	type dialed struct {
		cl  *bus.Client
		err error
	}
	ch := make(chan dialed, 1)
	go func() {
		cl, err := bus.Dial(ctx, dir, name, opts...)
		ch <- dialed{cl, err}
	}()
	select {
	case d := <-ch:
		return d.cl, d.err
	case <-ctx.Done():
		go func() {
			if d := <-ch; d.cl != nil {
				d.cl.Close()
			}
		}()
		return nil, context.Cause(ctx)
	}
}

// stoppedLeader returns the leader of name when it is suspended (SIGSTOP,
// Ctrl-Z, a debugger): it holds the lock and its socket accepts
// connections, but it cannot answer.
func stoppedLeader(ctx context.Context, c *cli.Context, name string) (elect.Holder, bool) {
	lk, err := openLocker(c)
	if err != nil {
		return elect.Holder{}, false
	}
	defer lk.Close()
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	snap, err := lk.Query(qctx, name)
	if err != nil {
		return elect.Holder{}, false
	}
	for _, h := range snap.Held {
		if h.State == "stopped" {
			return h, true
		}
	}
	return elect.Holder{}, false
}

// stoppedLine says that the leader of name cannot answer and what to do.
func stoppedLine(cmd, name string, h elect.Holder) string {
	return fmt.Sprintf("leaderrun %s: the leader of %s (pid %d) is stopped (SIGSTOP, Ctrl-Z or a debugger) and cannot answer; resume it with kill -CONT %d, or take over with leaderrun --steal --name %s -- COMMAND",
		cmd, name, h.PID, h.PID, name)
}
