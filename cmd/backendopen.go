package cmd

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
	"github.com/urfave/cli/v3"
)

// How the app opens its Backend for a command line and gives it its flags
// (WithBackend, FlagValue), and the Unix-socket bus of a Backend that has
// none of its own: the workings behind the seam that backend.go defines.

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

// cliFlags are the app's backend flags as urfave/cli flags: the
// environment is read by flagValue, not by urfave/cli, so that a flag is
// "set" only where it was given.
func (a *App) cliFlags() []cli.Flag {
	var out []cli.Flag
	for _, f := range a.flags {
		usage := f.Usage
		if f.EnvVar != "" {
			usage += " (env " + f.EnvVar + ")"
		}
		if f.Bool {
			out = append(out, &cli.BoolFlag{Name: f.Name, Usage: usage})
		} else {
			out = append(out, &cli.StringFlag{Name: f.Name, Usage: usage, DefaultText: f.Value})
		}
	}
	return out
}

// flagValue is the FlagValue of the command line c runs.
func (a *App) flagValue(c *cli.Command) FlagValue {
	return func(name string) string {
		i := slices.IndexFunc(a.flags, func(f BackendFlag) bool { return f.Name == name })
		if i < 0 {
			// Only a flag of the command being run: status has no
			// --grace, though the app (the default action) has.
			if !slices.ContainsFunc(c.Flags, func(f cli.Flag) bool { return slices.Contains(f.Names(), name) }) {
				return ""
			}
			if v := c.Generic(name); v != nil {
				return fmt.Sprint(v) // a duration, such as grace
			}
			return ""
		}
		f := a.flags[i]
		for _, cc := range c.Lineage() {
			if slices.Contains(cc.LocalFlagNames(), name) {
				if f.Bool {
					return strconv.FormatBool(cc.Bool(name))
				}
				return cc.String(name)
			}
		}
		if v, ok := os.LookupEnv(f.EnvVar); ok && f.EnvVar != "" {
			return v
		}
		if f.Bool && f.Value == "" {
			return "false"
		}
		return f.Value
	}
}

// busPort is the part of BusBackend the commands call.
type busPort interface {
	ListenBus(lead *elect.Leadership) (BusServer, error)
	DialBus(ctx context.Context, name string, o BusOptions) (BusClient, error)
}

// unixBus is package bus in a lock directory.
type unixBus struct{ dir string }

func (unixBus) ListenBus(lead *elect.Leadership) (BusServer, error) {
	srv, err := bus.Listen(lead)
	if err != nil {
		return nil, err
	}
	return srv, nil
}

func (u unixBus) DialBus(ctx context.Context, name string, o BusOptions) (BusClient, error) {
	var opts []bus.DialOption
	if o.WaitForLeader {
		opts = append(opts, bus.WaitForLeader())
	}
	if o.PublishOnly {
		opts = append(opts, bus.PublishOnly())
	}
	cl, err := dialBus(ctx, u.dir, name, opts...)
	if err != nil {
		return nil, err
	}
	return cl, nil
}
