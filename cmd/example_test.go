package cmd_test

import (
	"context"
	"os"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/elect"
)

// A command line over another election backend: here elect's own, opened
// with a fixed directory whatever --dir says.
func ExampleWithBackend() {
	app := cmd.New(cmd.WithBackend(func(c elect.Config) (cmd.Backend, error) {
		c.Dir = "/run/lock/myapp"
		lk, err := elect.Open(c)
		if err != nil {
			return nil, err // not a nil *elect.Locker in a non-nil Backend
		}
		return lk, nil
	}))
	os.Exit(cmd.ExitCode(app.RunContext(context.Background(), os.Args)))
}
