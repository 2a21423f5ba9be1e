package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
	"github.com/urfave/cli/v3"
)

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
func stoppedLeader(ctx context.Context, c *cli.Command, name string) (elect.Holder, bool) {
	return heldBy(ctx, c, name, func(h elect.Holder) bool { return h.State == "stopped" })
}

// heldBy returns the first holder of name that ok approves, asking the
// backend once (within a second).
func heldBy(ctx context.Context, c *cli.Command, name string, ok func(elect.Holder) bool) (elect.Holder, bool) {
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
		if ok(h) {
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
