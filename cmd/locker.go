package cmd

import (
	"github.com/leaderrun/leaderrun/elect"
	"github.com/urfave/cli/v3"
)

// openLocker opens the lock directory c names (lockDir), or the default
// directory (created 0700) when it names none; an explicit directory must
// exist already. --group-shared and --allow-unsafe-fs, app flags, are
// seen from every subcommand. The Backend is the app's (WithBackend).
func openLocker(c *cli.Command) (Backend, error) {
	open, value := FlagOpener(openElect), FlagValue(nil)
	if a, ok := c.Root().Metadata[backendKey].(*App); ok && a.open != nil {
		open, value = a.open, a.flagValue(c)
	}
	return open(elect.Config{
		Dir:           lockDir(c),
		GroupShared:   c.Bool("group-shared"),
		AllowUnsafeFS: c.Bool("allow-unsafe-fs"),
	}, value)
}
