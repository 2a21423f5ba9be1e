package cmd

import "github.com/urfave/cli/v3"

// Manual is the command line as its manual page (internal/man) shows it,
// read from the command tree: the app, whose Commands are the
// subcommands in --help's order.
type Manual struct {
	Name, Usage, UsageText, ArgsUsage, Description string
	Flags                                          []ManualFlag
	Commands                                       []Manual
	// Environment is the app's: Environment and the variables of the
	// programs it hands over to; empty for a subcommand.
	Environment []EnvRow
}

// ManualFlag is one flag of a Manual.
type ManualFlag struct {
	Names      []string // the name, then its aliases
	Usage      string   // with the value's placeholder in backquotes (`NAME`)
	TakesValue bool
	EnvVars    []string
}

// ManualOf describes the command line that New(opts...) builds. Nothing
// in the leaderrun binary calls it.
func ManualOf(opts ...Option) Manual {
	a := New(opts...)
	m := manualOf(a.root)
	m.Environment = a.environment()
	return m
}

func manualOf(c *cli.Command) Manual {
	m := Manual{Name: c.Name, Usage: c.Usage, UsageText: c.UsageText, ArgsUsage: c.ArgsUsage, Description: c.Description}
	for _, f := range c.VisibleFlags() {
		doc, ok := f.(cli.DocGenerationFlag)
		if !ok {
			continue
		}
		m.Flags = append(m.Flags, ManualFlag{Names: f.Names(), Usage: doc.GetUsage(), TakesValue: doc.TakesValue(), EnvVars: doc.GetEnvVars()})
	}
	for _, sub := range c.VisibleCommands() {
		m.Commands = append(m.Commands, manualOf(sub))
	}
	return m
}
