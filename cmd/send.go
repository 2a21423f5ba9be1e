package cmd

import (
	"context"
	"errors"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/instance"
	"github.com/urfave/cli/v3"
)

// sendCommand is `leaderrun send NAME -- ARG...`: a later instance of
// --single-instance that never runs COMMAND itself.
func sendCommand() *cli.Command {
	return &cli.Command{
		Name:      "send",
		Usage:     "hand ARGs to the primary of a --single-instance NAME, print its answer, exit with its code",
		ArgsUsage: "NAME [--] [ARG...]",
		Description: `Forwards ARG..., the working directory and the variables named by
--forward-env to the COMMAND of "leaderrun --single-instance --name NAME",
prints what it answers and exits with its code. Never runs anything itself:
exit 1 when no primary runs; 75 when it does not accept within
--ack-timeout (naming its pid and state); 76 when it accepted and ended
before answering; 77 when it runs as another user.`,
		Flags: []cli.Flag{
			dirFlag(),
			&cli.StringSliceFlag{Name: "forward-env", Usage: "also forward the variable `NAME` (repeat, or NAME,NAME; * for all)"},
			&cli.BoolFlag{Name: "forward-stdin", Usage: "stream stdin to the primary's COMMAND"},
			&cli.GenericFlag{Name: "ack-timeout", Usage: "how long the primary has to accept (`DURATION`)", Value: &durationValue{d: 5 * time.Second, set: true}},
		},
		Action: sendAction,
	}
}

func sendAction(ctx context.Context, c *cli.Command) error {
	argv := c.Args().Slice()
	if len(argv) == 0 {
		return usageErrorf("leaderrun send: no NAME given; write leaderrun send NAME -- ARG...")
	}
	name, rest := argv[0], argv[1:] // the parser took the -- that ends the flags
	if err := elect.ValidateName(name); err != nil {
		return usageErrorf("leaderrun send: %v", err)
	}
	ack, _ := durationFlag(c, "ack-timeout")
	if ack <= 0 {
		return usageErrorf("leaderrun send: --ack-timeout must be positive")
	}
	args := make([][]byte, len(rest))
	for i, a := range rest {
		args[i] = []byte(a)
	}
	res, err := instance.Run(ctx, name, instance.Options{
		Dir: lockDir(c), GroupShared: c.Bool("group-shared"), Args: args, Env: forwardEnv(c),
		AckTimeout: ack, ForwardOnly: true, Stdin: stdinIf(c.Bool("forward-stdin")),
	}, func(context.Context, *instance.Primary) error {
		return errors.New("leaderrun send: became the primary, which ForwardOnly forbids")
	})
	if err != nil {
		return singleError(name, err)
	}
	return silentExit(res.Exit)
}
