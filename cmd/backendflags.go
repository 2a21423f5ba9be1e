package cmd

import (
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/urfave/cli/v3"
)

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
