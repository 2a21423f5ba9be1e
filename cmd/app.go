package cmd

import (
	"context"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

// App is the leaderrun command line. It wraps *cli.App to keep
// `leaderrun -- who` running who(1) rather than the who command, and to
// print the final error once.
type App struct{ *cli.App }

// New builds the command line.
func New() *App {
	app := &cli.App{
		Name:  "leaderrun",
		Usage: "run a command on only one instance at a time, elected over flock(2)",
		UsageText: `leaderrun [flags] -- COMMAND [ARG...]
leaderrun status [NAME] [--json] [--watch]
leaderrun who NAME [--json]
leaderrun publish NAME [MESSAGE...]
leaderrun subscribe NAME [--json] [--count N]
leaderrun --single-instance [--name APP] -- COMMAND [ARG...]
leaderrun send APP [--] [ARG...]`,
		Description:            runDescription,
		Flags:                  append(runFlags(), singleFlags()...),
		Action:                 runAction,
		Commands:               []*cli.Command{statusCommand(), whoCommand(), publishCommand(), subscribeCommand(), sendCommand(), completionCommand()},
		EnableBashCompletion:   true,
		HideVersion:            true,
		Suggest:                true,
		UseShortOptionHandling: true,
		Writer:                 os.Stdout,
		ErrWriter:              os.Stderr,
		// Without it urfave/cli calls os.Exit inside Run, skipping
		// deferred cleanup; main exits once with ExitCode.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError:   onUsageError,
	}
	for _, c := range app.Commands {
		c.OnUsageError = onUsageError
	}
	return &App{app}
}

func onUsageError(c *cli.Context, err error, isSubcommand bool) error {
	help := "leaderrun --help"
	if isSubcommand {
		help = "leaderrun " + c.Command.Name + " --help"
	}
	return usageErrorf("leaderrun: %v; see %s", err, help)
}

// RunContext runs the command line in args (os.Args) and prints the error,
// if any, once. Map the error to an exit status with ExitCode.
func (a *App) RunContext(ctx context.Context, args []string) error {
	err := startPoller()
	if err == nil {
		err = a.App.RunContext(ctx, hoistFlags(protectDashDash(args, a.Flags), a.Flags, a.Commands))
	}
	if err != nil {
		if _, ok := err.(*exitError); !ok {
			err = classify(err)
		}
		printErr(err)
	}
	return err
}

// protectDashDash doubles the `--` that ends leaderrun's own flags, so that
// urfave/cli, which drops it while parsing, leaves one in front of COMMAND
// and does not take a COMMAND named like a subcommand (who, status) for
// that subcommand. runAction removes it again.
func protectDashDash(args []string, flags []cli.Flag) []string {
	takesValue := map[string]bool{}
	for _, f := range flags {
		if _, ok := f.(*cli.BoolFlag); ok {
			continue
		}
		for _, n := range f.Names() {
			takesValue[n] = true
		}
	}
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			out := append([]string{}, args[:i+1]...)
			return append(append(out, "--"), args[i+1:]...)
		case !strings.HasPrefix(a, "-") || a == "-":
			return args // COMMAND without --, or a subcommand
		case !strings.Contains(a, "="):
			// A short group like -nE 3 ends with the flag that takes the value.
			name := strings.TrimLeft(a, "-")
			if !strings.HasPrefix(a, "--") && len(name) > 1 {
				name = name[len(name)-1:]
			}
			if takesValue[name] {
				i++
			}
		}
	}
	return args
}

// hoistFlags moves a subcommand's flags that follow its arguments in front
// of them, so that `leaderrun who NAME --json` works as documented:
// urfave/cli stops parsing flags at the first argument. Only the
// subcommand's own flag names move, and nothing after `--`.
func hoistFlags(args []string, appFlags []cli.Flag, cmds []*cli.Command) []string {
	// The subcommand is the first argument after the app's own flags
	// (`leaderrun --dir D who NAME --json`).
	at := 1
	appValue := takesValueOf(appFlags)
	for at < len(args) && strings.HasPrefix(args[at], "-") && args[at] != "-" && args[at] != "--" {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[at], "-"), "=")
		if appValue[name] && !hasValue {
			at++
		}
		at++
	}
	if at+1 >= len(args) {
		return args
	}
	var cmd *cli.Command
	for _, c := range cmds {
		if c.HasName(args[at]) {
			cmd = c
		}
	}
	if cmd == nil {
		return args
	}
	known, takesValue := map[string]bool{"help": true, "h": true}, map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			known[n] = true
			takesValue[n] = !isBool
		}
	}
	var flags, rest []string
	for i := at + 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || !known[name] {
			rest = append(rest, a)
			continue
		}
		flags = append(flags, a)
		if takesValue[name] && !hasValue && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	out := append([]string{}, args[:at+1]...)
	out = append(out, flags...)
	return append(out, rest...)
}

// takesValueOf maps each flag name to whether it takes a value.
func takesValueOf(flags []cli.Flag) map[string]bool {
	m := map[string]bool{}
	for _, f := range flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			m[n] = !isBool
		}
	}
	return m
}

func isSubcommand(name string) bool {
	switch name {
	case "status", "who", "publish", "subscribe", "send", "completion", "help":
		return true
	}
	return false
}

const runDescription = `Runs COMMAND when this instance leads NAME; other instances wait in line
(first come, first served) or give up (-n, -w). When leaderrun dies, even
of SIGKILL, COMMAND is stopped before another instance's COMMAND starts.

COMMAND runs in its own process group. SIGINT, SIGTERM, SIGHUP, SIGQUIT,
SIGUSR1 and SIGUSR2 are forwarded to that group; when COMMAND exits, is
stolen from, or leaderrun is told to stop, the whole group gets SIGTERM,
then SIGKILL after --grace. COMMAND does not inherit the lock: a stray
background process can never keep the lock after its leader is gone.

COMMAND's environment gains LEADERRUN_NAME, LEADERRUN_EPOCH (the fencing
token: it grows with every new leader), LEADERRUN_DIR and LEADERRUN_PID.

NAMES:
   Without --name, the name is BASE-HASH: BASE is COMMAND's last path
   element (bytes outside [A-Za-z0-9._@+=,:-] become _), HASH the first 8
   hex digits of the SHA-256 of COMMAND and its ARGs, each followed by a
   NUL byte. Give --name to share a lock between different command lines.
   The lock file is DIR/NAME.lock; flock(1) on it excludes leaderrun and
   the other way round.

DURATIONS:
   "1.5" is seconds; "1500ms", "2m", "1h30m" use Go's units.

EXAMPLES:
   # a cron job that must not overlap itself: skip the run if one is going
   leaderrun -n --name backup -- /usr/local/bin/backup.sh

   # standby instances: the first runs, the others take over when it dies
   leaderrun --name poller --restart on-failure -- ./poll.sh

   # wait at most 30 seconds for the lock, exit 3 if that was not enough
   leaderrun -w 30 -E 3 --name deploy -- make deploy

   # readers together, writers alone
   leaderrun -s --name db -- ./read-report.sh
   leaderrun --name db -- ./migrate.sh

   # a script that wraps itself
   [ -n "$LEADERRUN_EPOCH" ] || exec leaderrun --name job -- "$0" "$@"

   # who leads, and who waits
   leaderrun status
   leaderrun who poller

` + singleHelp + `
` + exitCodeHelp
