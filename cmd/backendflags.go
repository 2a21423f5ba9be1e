package cmd

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/urfave/cli/v3"
)

// BackendFlag is a flag that a backend adds to the command line
// (WithBackendFlags), on the app and on every subcommand, such as
// leaderrun-etcd's --etcd-endpoints.
type BackendFlag struct {
	Name  string
	Usage string
	// EnvVar is read when the flag is not given; "" for none.
	EnvVar string
	// Value is the default, when neither the flag nor EnvVar is set.
	Value string
	// Bool makes it a switch that takes no value.
	Bool bool
}

// FlagValue returns the value of one of the backend's flags for the
// command line being run: as given to the innermost command that has it,
// else its EnvVar's, else its Value. A Bool flag's value is "true" or
// "false". For another flag of the command line that takes a duration,
// such as grace, it returns its value, or "" where the command has no
// such flag.
type FlagValue func(name string) string

// FlagOpener opens the Backend for the lock directory settings of one
// command line and the values of the backend's own flags.
type FlagOpener func(elect.Config, FlagValue) (Backend, error)

// WithBackendFlags adds flags to every command and makes the commands use
// open instead of elect.Open; see WithBackend for a backend without flags.
func WithBackendFlags(flags []BackendFlag, open FlagOpener) Option {
	return func(a *App) {
		a.open = open
		a.flags = append(a.flags, flags...)
	}
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

// GraceFitter is a Backend whose terms leave COMMAND only so long to stop
// (leaderrun-etcd: within half the lease TTL). After Open, the run command
// takes the --grace it returns: grace itself when it fits; when it does
// not, a shorter one if --grace was not given (given false; note says why,
// for -v), else an error to exit with.
type GraceFitter interface {
	FitGrace(grace time.Duration, given bool) (fit time.Duration, note string, err error)
}
