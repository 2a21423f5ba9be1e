package cmd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
	"github.com/urfave/cli/v3"
)

func publishCommand() *cli.Command {
	return &cli.Command{
		Name:      "publish",
		Usage:     "send one message (ARGs joined by spaces), or one per stdin line, to NAME's bus",
		ArgsUsage: "NAME [MESSAGE...]",
		Description: `Delivers messages through the leader of NAME to every subscriber. With
MESSAGE arguments, sends one message: the arguments joined by spaces. Without
them, sends one message per line of standard input, until end of input.

EXAMPLES:
   leaderrun publish alerts disk full on /srv
   tail -F /var/log/app.log | leaderrun publish applog`,
		Flags:         []cli.Flag{subDirFlag()},
		Action:        publishAction,
		ShellComplete: completeNames,
	}
}

func publishAction(ctx context.Context, c *cli.Command) error {
	if c.NArg() < 1 {
		return usageErrorf("leaderrun publish: give a NAME, as in leaderrun publish alerts hello")
	}
	s, err := begin(ctx, c, "publish", c.Args().First(), false)
	if err != nil {
		return err
	}
	defer s.close()
	cl, err := dialPublisher(s.ctx, c, s.bus, s.name)
	if err != nil {
		return publishFailed(c, s, err)
	}
	defer cl.Close()
	publish := func(data []byte) error {
		if err := publishChecked(s.ctx, c, cl, s.name, data); err != nil {
			return publishFailed(c, s, err)
		}
		return nil
	}
	if c.NArg() > 1 {
		return publish([]byte(strings.Join(c.Args().Tail(), " ")))
	}
	return publishLines(s.ctx, publish)
}

// busWait bounds how long a publish waits for the bus of a leader that
// does not serve it yet: a leader serves its bus once COMMAND has run a
// few milliseconds (busDelay).
const busWait = 2 * time.Second

// dialPublisher connects to the leader of name to publish. A name led by
// a leaderrun whose bus is not up yet (its COMMAND has just started, and
// may be the publisher) is waited for, up to busWait.
func dialPublisher(ctx context.Context, c *cli.Command, b busPort, name string) (BusClient, error) {
	cl, err := b.DialBus(ctx, name, BusOptions{PublishOnly: true})
	if !errors.Is(err, bus.ErrNoLeader) || !ledByLeaderrun(ctx, c, name) {
		return cl, err
	}
	wctx, cancel := context.WithTimeout(ctx, busWait)
	defer cancel()
	cl, werr := b.DialBus(wctx, name, BusOptions{PublishOnly: true, WaitForLeader: true})
	if werr != nil && ctx.Err() == nil {
		return nil, err // still nobody serves: say so as before
	}
	return cl, werr
}

// ledByLeaderrun reports whether a running leaderrun holds name in
// exclusive mode, which serves the bus or is about to.
func ledByLeaderrun(ctx context.Context, c *cli.Command, name string) bool {
	_, ok := heldBy(ctx, c, name, func(h elect.Holder) bool {
		return !h.External && h.State != "stopped" && h.Mode == elect.Exclusive
	})
	return ok
}

// publishFailed is the exit for a publish that failed with err: the
// signal's status, a stopped leader (1), or busError.
func publishFailed(c *cli.Command, s *cmdSession, err error) error {
	if e := signalExit(s.ctx); e != nil {
		return e
	}
	name := s.name
	var stopped errLeaderStopped
	if errors.As(err, &stopped) {
		h := stopped.h
		return exitf(ExitNoLeader, "leaderrun publish: the leader of %s (pid %d) was stopped (SIGSTOP, Ctrl-Z or a debugger) with the message, which it may still deliver when it runs again; resume it with kill -CONT %d, or take over with leaderrun --steal --name %s -- COMMAND", name, h.PID, h.PID, name)
	}
	if h, ok := stoppedLeader(s.ctx, c, name); ok {
		return exitf(ExitNoLeader, "%s", stoppedLine("publish", name, h))
	}
	return busError("publish", name, err)
}

// publishLines publishes each line of stdin until its end or ctx's.
// Lines are read on their own goroutine: a read of stdin cannot be
// cancelled, and a signal must end publish at once, also while it waits
// for input.
func publishLines(ctx context.Context, publish func([]byte) error) error {
	lines := make(chan []byte)
	var readErr error
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 64<<10), bus.DefaultMaxMessageSize)
		for sc.Scan() {
			select {
			case lines <- bytes.Clone(sc.Bytes()):
			case <-ctx.Done():
				return
			}
		}
		readErr = sc.Err()
	}()
	for {
		select {
		case <-ctx.Done():
			return signalExit(ctx)
		case line, ok := <-lines:
			if !ok {
				if readErr != nil {
					return exitf(ExitSoftware, "leaderrun publish: reading stdin: %v", readErr)
				}
				return nil
			}
			if err := publish(line); err != nil {
				return err
			}
		}
	}
}

// stoppedCheck is how long a publish waits for the leader's answer
// before it asks whether the leader is stopped, and how often it asks
// again: bus.Publish itself waits for as long as its ctx lets it.
const stoppedCheck = 5 * time.Second

// errLeaderStopped ends a publish whose leader was stopped after it
// connected.
type errLeaderStopped struct{ h elect.Holder }

func (e errLeaderStopped) Error() string { return "the leader is stopped" }

// publishChecked is cl.Publish, ended with errLeaderStopped when the
// leader turns out to be stopped while it waits for the answer.
func publishChecked(ctx context.Context, c *cli.Command, cl BusClient, name string, data []byte) error {
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(stoppedCheck)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if h, ok := stoppedLeader(pctx, c, name); ok {
					cancel(errLeaderStopped{h})
					return
				}
			}
		}
	}()
	err := cl.Publish(pctx, data)
	var stopped errLeaderStopped
	if err != nil && errors.As(context.Cause(pctx), &stopped) {
		return stopped
	}
	return err
}

// busError explains a bus failure and what to do about it.
func busError(cmd, name string, err error) error {
	switch {
	case errors.Is(err, bus.ErrNoLeader):
		return exitf(ExitNoLeader, "leaderrun %s: nobody leads %s, so nobody serves its bus; start a leader first (leaderrun --name %s -- COMMAND)", cmd, name, name)
	case errors.Is(err, bus.ErrLeaderChanged):
		return exitf(ExitNoLeader, "leaderrun %s: the leader of %s changed before answering; the message may or may not have been delivered", cmd, name)
	case errors.Is(err, bus.ErrTooLarge):
		return exitf(ExitUsage, "leaderrun %s: %v", cmd, err)
	case errors.Is(err, context.Canceled):
		return silentExit(ExitSignalBase + int(syscall.SIGINT))
	}
	if e := resourceError(err); e != nil {
		return e
	}
	// A failed socket call (connect, a read or write of the handshake)
	// says which call failed, not what the user was doing: say that.
	var se *os.SyscallError
	var pe *fs.PathError
	if errors.As(err, &se) || errors.As(err, &pe) && strings.HasSuffix(pe.Path, ".sock") {
		return exitf(ExitSoftware, "leaderrun %s: cannot talk to the leader of %s: %v; see who leads with leaderrun status %s", cmd, name, rootCause(err), name)
	}
	return classify(fmt.Errorf("%s: %w", cmd, err))
}

// rootCause is the innermost error that err wraps.
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
