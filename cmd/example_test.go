package cmd_test

import (
	"context"
	"os"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/elect"
)

// A command line over another election backend: here elect's own, in a
// fixed directory whatever --dir says.
func ExampleWithBackend() {
	app := cmd.New(cmd.WithBackend(func(cmd.FlagValue) (cmd.Backend, error) {
		lk, err := elect.Open(elect.Config{Dir: "/run/lock/myapp"})
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
func ExampleWithBackend_flags() {
	region := cmd.BackendFlag{Name: "region", EnvVar: "MYAPP_REGION", Value: "eu", Usage: "the `REGION` whose locks to use"}
	os.Exit(cmd.Main(cmd.WithBackend(func(v cmd.FlagValue) (cmd.Backend, error) {
		lk, err := elect.Open(elect.Config{Dir: "/run/lock/myapp-" + v("region")})
		if err != nil {
			return nil, err
		}
		return lk, nil
	}, region)))
}
