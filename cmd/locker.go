package cmd

import (
	"context"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/urfave/cli/v2"
)

// locker is what the commands need from the election layer; elect.Locker
// provides it.
type locker interface {
	Dir() string
	Close() error
	Acquire(ctx context.Context, name string, r elect.Request) (*elect.Leadership, error)
	Query(ctx context.Context, name string) (elect.Snapshot, error)
	QueryAll(ctx context.Context) (elect.Snapshot, error)
}

// openLocker opens the lock directory c names (lockDir), or the default
// directory (created 0700) when it names none; an explicit directory must
// exist already. --group-shared and --allow-unsafe-fs, app flags, are
// seen from every subcommand.
func openLocker(c *cli.Context) (locker, error) {
	return elect.Open(elect.Config{
		Dir:           lockDir(c),
		GroupShared:   c.Bool("group-shared"),
		AllowUnsafeFS: c.Bool("allow-unsafe-fs"),
	})
}
