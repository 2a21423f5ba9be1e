package cmd

import (
	"context"
	"strings"

	"github.com/urfave/cli/v3"
)

// The app's help: the help command, --help's template, and the usage
// errors (64) of a bad line.

// appHelpTemplate is the app's --help without a VERSION section: the
// version is read from the build info only for --version (VersionPrinter),
// and the placeholder in Version is not shown.
var appHelpTemplate = strings.Replace(cli.RootCommandHelpTemplate, "{{if .Version}}{{if not .HideVersion}}\n\nVERSION:\n   {{.Version}}{{end}}{{end}}", "", 1)

// helpCommand is the app's help command, as urfave/cli's own (which it
// adds when there is none), but a bad line is a usage error (64), not
// urfave/cli's plain error (70), and `leaderrun help <TAB>` completes the
// commands.
func helpCommand() *cli.Command {
	return &cli.Command{
		Name:         "help",
		Aliases:      []string{"h"},
		Usage:        cli.UsageCommandHelp,
		ArgsUsage:    cli.ArgsUsageCommandHelp,
		HideHelp:     true,
		OnUsageError: onUsageError,
		Action: func(ctx context.Context, c *cli.Command) error {
			if topic := c.Args().First(); topic != "" {
				return cli.ShowCommandHelp(ctx, c.Root(), topic) // noHelpTopic when there is none
			}
			return cli.ShowRootCommandHelp(c.Root())
		},
		ShellComplete: func(ctx context.Context, c *cli.Command) { completeCommands(ctx, c.Root()) },
	}
}

func onUsageError(_ context.Context, c *cli.Command, err error, isSubcommand bool) error {
	help := "leaderrun --help"
	if isSubcommand && c.Name != "help" { // help has no --help
		help = "leaderrun " + c.Name + " --help"
	}
	return usageErrorf("leaderrun: %v; see %s", err, help)
}

// subcommandHelp prints c's help, whatever topic its --help or help
// command was given.
func subcommandHelp(ctx context.Context, c *cli.Command, _ string) {
	_ = cli.ShowCommandHelp(ctx, c.Root(), c.Name)
}

// noHelpTopic refuses `leaderrun help NOSUCH` with a usage error
// (urfave/cli's own would exit 3); Run returns it.
func (a *App) noHelpTopic(_ context.Context, _ *cli.Command, topic string) {
	a.helpErr = usageErrorf("leaderrun help: %q is not a command; the commands are %s", topic, strings.Join(subcommandNames(commands()), ", "))
}
