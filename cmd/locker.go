package cmd

import (
	"github.com/leaderrun/leaderrun/elect"
	"github.com/urfave/cli/v3"
)

// openLocker opens the app's Backend (WithBackend) for the command line c
// runs, or elect's flock backend in the lock directory c names (lockDir),
// or the default directory (created 0700) when it names none; an explicit
// directory must exist already. --group-shared and --allow-unsafe-fs, app
// flags, are seen from every subcommand.
func openLocker(c *cli.Command) (*opened, error) {
	cfg := elect.Config{
		Dir:           lockDir(c),
		GroupShared:   c.Bool("group-shared"),
		AllowUnsafeFS: c.Bool("allow-unsafe-fs"),
	}
	a, ok := c.Root().Metadata[backendKey].(*App)
	if !ok || a.open == nil {
		lk, err := elect.Open(cfg)
		if err != nil {
			return nil, err
		}
		return &opened{b: lk, dir: lk.Dir()}, nil
	}
	b, err := a.open(a.flagValue(c))
	if err != nil {
		return nil, err
	}
	return openBackend(b, cfg)
}
