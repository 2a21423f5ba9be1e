package cmd

import (
	"github.com/leaderrun/leaderrun/elect"
	"github.com/urfave/cli/v2"
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
		Flags:  []cli.Flag{dirFlag()},
		Action: publishAction,
	}
}

func publishAction(c *cli.Context) error {
	if c.NArg() < 1 {
		return usageErrorf("leaderrun publish: give a NAME, as in leaderrun publish alerts hello")
	}
	if err := elect.ValidateName(c.Args().First()); err != nil {
		return usageErrorf("leaderrun publish: %v", err)
	}
	return errNoBus
}
