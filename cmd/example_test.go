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
	os.Exit(cmd.ExitCode(app.Run(context.Background(), os.Args)))
}

// A backend with flags of its own: --region, also read from MYAPP_REGION,
// reaches the backend's opener through FlagValue, as leaderrun-etcd's
// --etcd-endpoints does.
func ExampleWithBackendFlags() {
	flags := []cmd.BackendFlag{{Name: "region", EnvVar: "MYAPP_REGION", Value: "eu", Usage: "the `REGION` whose locks to use"}}
	os.Exit(cmd.Main(cmd.WithBackendFlags(flags, func(c elect.Config, v cmd.FlagValue) (cmd.Backend, error) {
		c.Dir = "/run/lock/myapp-" + v("region")
		lk, err := elect.Open(c)
		if err != nil {
			return nil, err
		}
		return lk, nil
	})))
}
