package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/instance"
	"github.com/urfave/cli/v3"

	"github.com/leaderrun/leaderrun/supervise"
)

// ExitAcceptedLost: the primary accepted the forwarded arguments and ended
// before answering; they were not run again.
const ExitAcceptedLost = 76

// The descriptors COMMAND gets as the primary of --single-instance.
const (
	invocationsFD = 3
	repliesFD     = 4
)

// singleFlags are the flags of --single-instance; app.go adds them to the
// default action's.
func singleFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{
			Name:  "single-instance",
			Usage: "the first instance runs COMMAND and hands it the ARGs of every later one (NDJSON on $LEADERRUN_INVOCATIONS_FD, answers on $LEADERRUN_REPLIES_FD); later ones print its answer and exit with its code (see SINGLE INSTANCE)",
		},
		&cli.StringSliceFlag{
			Name:  "forward-env",
			Usage: "with --single-instance or send: also forward the variable `NAME` (repeat, or NAME,NAME; * for all); none by default",
		},
		&cli.GenericFlag{
			Name:  "ack-timeout",
			Usage: "with --single-instance or send: how long the primary has to accept the ARGs (`DURATION`); then fail naming it, or replace it with --replace",
			Value: &durationValue{d: 5 * time.Second, set: true},
		},
		&cli.BoolFlag{
			Name:  "forward-stdin",
			Usage: "with --single-instance or send: stream stdin to the primary's COMMAND (lines {\"id\",\"stdin_base64\"} on fd 3, then {\"id\",\"stdin_eof\":true})",
		},
		&cli.BoolFlag{
			Name:  "replace",
			Usage: "with --single-instance: replace a primary that did not accept within --ack-timeout (its term is stolen, it is killed) and run COMMAND here",
		},
	}
}

const singleHelp = `SINGLE INSTANCE:
   leaderrun --single-instance --name APP -- COMMAND ARG...
   The first instance runs COMMAND ARG... with LEADERRUN_INVOCATIONS_FD=3
   and LEADERRUN_REPLIES_FD=4. Each later instance sends its ARGs (exact
   bytes), its working directory and the variables named by --forward-env;
   COMMAND reads one JSON object a line from fd 3:
     {"id":"...","args":["..."],"args_base64":["..."],"cwd":"...","env":["K=V"],
      "pid":N,"uid":N,"deadline_unix_ms":N}
   ("args" replaces bytes that are not UTF-8; "args_base64" is exact) and
   answers on fd 4, one JSON object a line:
     {"id":"...","accepted":true}       optional: taken, answer follows
     {"id":"...","stdout":"text"}       optional, repeatable (also "stderr",
                                      and "stdout_base64"/"stderr_base64")
     {"id":"...","exit":N}              done; the later instance exits N
   An id not accepted (or answered) by its deadline is refused: drop it.
   With --forward-stdin, the later instance's stdin follows its line on
   fd 3 as {"id":"...","stdin_base64":"..."} lines, then {"id","stdin_eof":true}.
   The later instance prints what COMMAND answered, and nothing else, and
   exits with its code; each failure prints one line naming the primary:
   75 it did not accept within --ack-timeout (stopped, hung, or not reading
   fd 3; --replace takes over), 76 it accepted and ended before answering
   (not run again), 77 it runs as another user. With -v, a later instance
   says on stderr when the primary has accepted. COMMAND has an
   invocation a moment before leaderrun tells the later instance it was
   accepted: if the primary's leaderrun is killed in between, the later
   instance runs COMMAND with it itself. Without --name the name
   comes from COMMAND alone, not its ARGs: give --name when COMMAND is an
   interpreter (python3 app.py), or every script it runs would share one.
   leaderrun send APP -- ARG... forwards without ever running COMMAND
   (exit 1 when no primary runs).
`

// singleAction is the default action with --single-instance.
func singleAction(ctx context.Context, c *cli.Command) error {
	o, ack, err := singleOptions(c)
	if err != nil {
		return err
	}
	s := &singleRun{o: o}
	ctx, cancel := s.signals(ctx)
	defer cancel(nil)
	args := make([][]byte, len(o.argv)-1)
	for i, a := range o.argv[1:] {
		args[i] = []byte(a)
	}
	res, err := instance.Run(ctx, o.name, instance.Options{
		Dir: o.dir, GroupShared: c.Bool("group-shared"), Args: args, Env: forwardEnv(c),
		AckTimeout: ack, Replace: c.Bool("replace"), KillAfter: max(2*o.grace, time.Second),
		Command: o.argv, ManualAccept: true, Stdin: stdinIf(c.Bool("forward-stdin")),
		OnForward: func(pid int) { o.logf("the primary of %s, pid %d, accepted the arguments", o.name, pid) },
	}, s.primary)
	if err != nil {
		var sig signalled
		if errors.As(context.Cause(ctx), &sig) {
			return exitf(ExitSignalBase+supervise.SignalNumber(sig.sig), "leaderrun: %v while handing the arguments to the primary of %s; if it had accepted them, it goes on with them", sig.sig, o.name)
		}
		return singleError(o.name, err)
	}
	if res.Primary && s.err != nil {
		return s.err
	}
	return silentExit(res.Exit)
}

// singleOptions are the default action's options for --single-instance,
// with --ack-timeout, or the usage error of a flag that does not go with
// it.
func singleOptions(c *cli.Command) (*runOptions, time.Duration, error) {
	for _, f := range []string{"nonblock", "wait", "shared", "steal", "steal-stopped", "fanout"} {
		if c.IsSet(f) {
			return nil, 0, usageErrorf("leaderrun: --single-instance cannot be combined with --%s; a later instance forwards to the first, it never waits in line to run COMMAND", f)
		}
	}
	if c.String("restart") != "never" {
		return nil, 0, usageErrorf("leaderrun: --single-instance cannot be combined with --restart; the primary runs COMMAND once")
	}
	if !c.IsSet("name") {
		argv := c.Args().Slice()
		if len(argv) > 0 && argv[0] == "--" {
			argv = argv[1:]
		}
		if len(argv) > 0 {
			c.Set("name", deriveName(argv[:1]))
		}
	}
	o, err := runOptionsFrom(c)
	if err != nil {
		return nil, 0, err
	}
	// The primary's COMMAND is the service: it keeps NOTIFY_SOCKET and
	// reports its own readiness; leaderrun sends nothing (sdnotify.go).
	o.notify = nil
	ack, _ := durationFlag(c, "ack-timeout")
	if ack <= 0 {
		return nil, 0, usageErrorf("leaderrun: --ack-timeout must be positive")
	}
	return o, ack, nil
}

// signals routes the forwarded signals: until this instance is the
// primary, a terminating one ends the forward, the context returned, with
// the signal as its cause (the exit status says which); once it is, they
// go to COMMAND as in a plain run (s.sigs). Call cancel when done.
func (s *singleRun) signals(ctx context.Context) (context.Context, context.CancelCauseFunc) {
	sigs := s.o.early.take()
	// Until this instance is the primary, a terminating signal ends the
	// forward (the exit status says which); once it is, signals go to
	// COMMAND as in a plain run.
	s.sigs = make(chan os.Signal, 8)
	// Not main's signal context: the goroutine below ends the forward
	// with the signal as the cause, which the exit status needs.
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	go func() {
		for sig := range sigs {
			if s.leading.Load() {
				s.sigs <- sig
			} else if supervise.Terminating(sig) {
				cancel(signalled{sig})
			}
		}
	}()
	return ctx, func(cause error) {
		signal.Stop(sigs)
		cancel(cause)
	}
}

func stdinIf(on bool) io.Reader {
	if on {
		return os.Stdin
	}
	return nil
}

func forwardEnv(c *cli.Command) []string {
	var names []string
	for _, v := range c.StringSlice("forward-env") {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
	}
	return names
}

// singleError turns the library's failures into one line naming the
// primary, with the exit code of the contract.
func singleError(name string, err error) error {
	var nr *instance.NotRespondingError
	switch {
	case errors.As(err, &nr) && nr.PID == 0:
		return exitf(ExitConflict, "leaderrun: nobody accepted the arguments for %s within %v, and no holder of it can be seen; try again", name, nr.Wait)
	case errors.As(err, &nr):
		// Advice for the person who launched this, by the primary's
		// state: they cannot change how its COMMAND reads fd 3. (send
		// has no --replace: the option is named with its command.)
		var advice string
		switch nr.State {
		case "stopped":
			advice = fmt.Sprintf("it is stopped (Ctrl-Z, SIGSTOP, a debugger or a frozen cgroup): resume it (kill -CONT %d) and launch again, or replace it with leaderrun --single-instance --replace", nr.PID)
		case "running":
			advice = fmt.Sprintf("it runs but took no arguments (busy, or its COMMAND does not read invocations): launch again later, or replace it with leaderrun --single-instance --replace (pid %d is killed)", nr.PID)
		default:
			advice = "launch again, or replace it with leaderrun --single-instance --replace"
		}
		return exitf(ExitConflict, "leaderrun: the primary of %s, pid %d (epoch %d, since %s), did not accept the arguments within %v; state %s; %s",
			name, nr.PID, nr.Epoch, nr.Since.Format(time.RFC3339), nr.Wait, nr.State, advice)
	case errors.Is(err, instance.ErrAcceptedLost):
		return exitf(ExitAcceptedLost, "leaderrun: %v; the arguments were not run again", err)
	case errors.Is(err, instance.ErrForeign):
		return exitf(ExitNoPerm, "leaderrun: %v; arguments are never forwarded to another user's primary", err)
	case errors.Is(err, instance.ErrNoPrimary):
		return exitf(ExitNoLeader, "leaderrun: no primary of %s is running; start one with leaderrun --single-instance --name %s -- COMMAND", name, name)
	case errors.Is(err, instance.ErrNotInstance):
		return exitf(ExitConflict, "leaderrun: %v; only a leaderrun --single-instance primary takes arguments", err)
	}
	return classify(err)
}
