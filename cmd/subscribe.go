package cmd

import (
	"github.com/leaderrun/leaderrun/elect"
	"github.com/urfave/cli/v2"
)

// errNoBus stands in until the bus package is wired in.
var errNoBus = exitf(ExitUnavailable, "leaderrun: the bus is not available in this build")

func subscribeCommand() *cli.Command {
	return &cli.Command{
		Name:      "subscribe",
		Usage:     "print each message published on NAME's bus on its own line",
		ArgsUsage: "NAME",
		Description: `Prints every message published on NAME, one per line, and keeps going
across leader changes. --json prints NDJSON events, leader announcements
included. --count N exits after N messages.

EXAMPLES:
   leaderrun subscribe applog
   leaderrun subscribe alerts --count 1
   leaderrun subscribe poller --json | jq -c 'select(.type=="message")'`,
		Flags: []cli.Flag{
			dirFlag(),
			jsonFlag("print NDJSON events, leader announcements included"),
			&cli.IntFlag{Name: "count", Usage: "exit after `N` messages (0: never)"},
		},
		Action: subscribeAction,
	}
}

func subscribeAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErrorf("leaderrun subscribe: give exactly one NAME, as in leaderrun subscribe alerts")
	}
	if err := elect.ValidateName(c.Args().First()); err != nil {
		return usageErrorf("leaderrun subscribe: %v", err)
	}
	if c.Int("count") < 0 {
		return usageErrorf("leaderrun subscribe: --count %d is negative; give 0 (never stop) or more", c.Int("count"))
	}
	return errNoBus
}
