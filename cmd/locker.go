package cmd

import (
	"context"

	"github.com/leaderrun/leaderrun/elect"
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

// openLocker opens dir, or the default directory (created 0700) when dir
// is empty. An explicit directory must exist already.
func openLocker(dir string) (locker, error) {
	return elect.Open(elect.Config{Dir: dir})
}
