package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v3"

	"github.com/leaderrun/leaderrun/supervise"
)

// App is the leaderrun command line, built by New and run by Run. It
// keeps `leaderrun -- who` running who(1) rather than the who command, and
// prints the final error once. Its command tree is urfave/cli's, which App
// does not expose. An App runs one command line (its flags keep what was
// parsed): build another with New for the next.
type App struct {
	root    *cli.Command
	arity   map[string]bool // whether each of root's flags takes a value (takesValueOf)
	open    Opener          // nil: elect.Open's flock backend
	flags   []BackendFlag
	usage   string
	ender   func(ctx context.Context, token string) error
	prepare TermEndPreparer
	// handovers: the programs of other backends this command line
	// hands over to (handover.go).
	handovers []Handover
	// helpErr is `leaderrun help NOSUCH`'s usage error (noHelpTopic).
	helpErr error
	// exits: the process exits once Run returns (Main), so that what the
	// kernel undoes anyway is left to it (signal.Stop: about 250 µs).
	exits bool
	// early: the forwarded signals Main caught from its start, for a
	// line that runs COMMAND (catchEarly), or nil.
	early *caught
}

// Option changes how New builds the app.
type Option func(*App)

// WithUsage replaces the one-line summary of --help (say, the backend's).
func WithUsage(usage string) Option { return func(a *App) { a.usage = usage } }

// commands is the list of subcommands, in the order --help shows them.
// Every other list of subcommand names (isSubcommand, the manual,
// completion) is derived from it.
func commands() []*cli.Command {
	return []*cli.Command{
		statusCommand(),
		whoCommand(),
		publishCommand(),
		subscribeCommand(),
		sendCommand(),
		lockfileCommand(),
		completionCommand(),
	}
}

func init() {
	// urfave/cli's default --version has the alias -v, which is --verbose
	// here; its printer is replaced so that the build info is read only
	// when asked for.
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Usage: "print the version and VCS revision, then exit", Local: true}
	cli.VersionPrinter = func(c *cli.Command) { fmt.Fprintln(c.Root().Writer, version()) }
	// The exit status table is rendered into the app's help only when
	// help is printed, not at every start.
	printHelp := cli.HelpPrinter
	cli.HelpPrinter = func(w io.Writer, templ string, data any) {
		if c, ok := data.(*cli.Command); ok && c.Description == runDescription {
			a, _ := c.Root().Metadata[backendKey].(*App)
			c.Description = runDescription + "\n" + a.envHelp() + "\n" + exitCodeHelp()
			defer func() { c.Description = runDescription }()
		}
		printHelp(w, templ, data)
	}
}

// New builds the command line.
func New(opts ...Option) *App {
	a := &App{}
	for _, o := range opts {
		o(a)
	}
	root := &cli.Command{
		Name:  "leaderrun",
		Usage: "run a command on only one instance at a time, elected over flock(2)",
		UsageText: `leaderrun [flags] -- COMMAND [ARG...]
leaderrun status [NAME] [--json] [--watch]
leaderrun who NAME [--json]
leaderrun publish NAME [MESSAGE...]
leaderrun subscribe NAME [--json] [--count N]
leaderrun lockfile NAME
leaderrun completion bash|zsh|fish
leaderrun --version
leaderrun --single-instance [--name APP] -- COMMAND [ARG...]
leaderrun send APP [--] [ARG...]`,
		Description:            runDescription,
		Flags:                  append(runFlags(), singleFlags()...),
		Action:                 runAction,
		Commands:               commands(),
		EnableShellCompletion:  true,
		ShellComplete:          completeCommands, // completion.go
		Version:                "see --version",  // printed by cli.VersionPrinter
		Suggest:                true,
		StopOnNthArg:           &stopAtCommand,
		UseShortOptionHandling: true,
		Writer:                 os.Stdout,
		ErrWriter:              os.Stderr,
		// Without it urfave/cli calls os.Exit inside Run, skipping
		// deferred cleanup; main exits once with ExitCode.
		ExitErrHandler:                func(context.Context, *cli.Command, error) {},
		Before:                        checkDirFlags, // dirflag.go
		OnUsageError:                  onUsageError,
		CommandNotFound:               a.noHelpTopic,
		CustomRootCommandHelpTemplate: appHelpTemplate,
		Metadata:                      map[string]any{backendKey: a},
	}
	root.Flags = append(root.Flags, a.cliFlags()...)
	root.Flags = append(root.Flags, a.handoverFlagDefs()...) // handover.go
	for _, c := range root.Commands {
		a.setUp(c)
	}
	root.Commands = append(root.Commands, helpCommand())
	// urfave/cli flags apply to the subcommands too unless local: the
	// app's flags are its own (status has no -n), each subcommand has its
	// own --dir and backend flags.
	localFlags(root)
	a.arity = takesValueOf(root.Flags)
	if a.usage != "" {
		root.Usage = a.usage
	}
	a.root = root
	return a
}

// setUp gives the subcommand c what every subcommand has: the usage
// errors, the checks of --dir, the help of `leaderrun who NAME --help`
// (who's, not a topic NAME's), the completion of its flags, and the
// backend's flags (or, for the plain leaderrun, the flags it hands over
// to a backend's command).
func (a *App) setUp(c *cli.Command) {
	c.OnUsageError = onUsageError
	c.Before = checkDirFlags
	c.CommandNotFound = subcommandHelp
	if c.ShellComplete == nil {
		c.ShellComplete = completeCommands // its flags, and help
	}
	if c.Name != "completion" {
		c.Flags = append(c.Flags, a.cliFlags()...)
		c.Flags = append(c.Flags, a.handoverFlagDefs()...)
	}
}

// localFlags marks every flag of c and its subcommands local.
func localFlags(c *cli.Command) {
	for _, f := range c.Flags {
		switch f := f.(type) {
		case *cli.BoolFlag:
			f.Local = true
		case *cli.StringFlag:
			f.Local = true
		case *cli.IntFlag:
			f.Local = true
		case *cli.GenericFlag:
			f.Local = true
		case *cli.StringSliceFlag:
			f.Local = true
		}
	}
	for _, sub := range c.Commands {
		localFlags(sub)
	}
}

const backendKey = "leaderrun.app"

// Main runs leaderrun, built with opts, on os.Args and returns its exit
// status; main.go, leaderrun-etcd's main and the CLI tests
// (tests/clichaos) call it. It is also where a term's watchdog that needs
// the app's TermEnder runs (see supervise.RunWatchdog).
func Main(opts ...Option) int {
	a := New(opts...)
	a.exits = true
	if code, ok := a.runLateRole(); ok {
		return code
	}
	a.handOver(os.Args) // returns only if there is nothing to hand over to
	// After the hand-over, whose program must find the signals that
	// leaderrun was started with ignored still ignored.
	var ctx context.Context
	var stop context.CancelFunc
	if _, runs := a.lineOf(os.Args); runs {
		ctx, stop, a.early = catchEarly() // signals.go
	} else {
		ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	}
	defer stop()
	if err := supervise.PidsLimit(); err != nil {
		err = exitf(ExitOSErr, "leaderrun: %v", err)
		printErr(err)
		return ExitCode(err)
	}
	return ExitCode(a.Run(ctx, os.Args))
}

// runLateRole runs this process as a term's watchdog that ends its term
// with the app's WithTermEnder function, if it is one (supervise.RunWatchdog).
func (a *App) runLateRole() (int, bool) {
	te := supervise.TermEnd{End: a.ender}
	if a.prepare != nil {
		te.Prepare = a.prepare.PrepareTermEnd
	}
	return supervise.RunWatchdog(te)
}

// Run runs the command line in args (os.Args) and prints the error, if
// any, once. Map the error to an exit status with ExitCode.
func (a *App) Run(ctx context.Context, args []string) error {
	args = completionArgs(args) // completion.go
	if a.completeFlagValue(args) {
		return nil
	}
	err := startPoller()
	if err == nil {
		err = a.run(ctx, args)
	}
	if err != nil {
		if _, ok := err.(*exitError); !ok {
			err = classify(err)
		}
		printErr(err)
	}
	return err
}

// run parses args and runs the command they name: Run without the
// completion of flag values, the poller and the printing of the error.
func (a *App) run(ctx context.Context, args []string) error {
	args, runs := a.lineOf(args)
	if runs {
		// urfave/cli sets up every subcommand before it parses (their
		// help, their flags): not for a line that runs COMMAND. Nor its
		// help flag (whose set-up checks every flag's names for a clash),
		// help command and completion command: runsCommand is false for
		// a line that asks for help or completion, and everything after
		// COMMAND's first word is COMMAND's (BenchmarkParse: 945
		// allocations to 502, and about 2.5 times faster).
		a.root.Commands = nil
		a.root.HideHelp = true
		a.root.HideHelpCommand = true
		a.root.EnableShellCompletion = false
	}
	err := a.root.Run(ctx, args)
	if a.helpErr != nil {
		return a.helpErr
	}
	return err
}

// lineOf is args as the parse takes them, and whether they run COMMAND
// (runsCommand), not a subcommand, help or completion.
func (a *App) lineOf(args []string) ([]string, bool) {
	args = passThrough(protectDashDash(completionArgs(args), a.arity), a.root, a.arity)
	return args, runsCommand(args, a.root, a.arity)
}

// subcommandNames lists the names of cmds.
func subcommandNames(cmds []*cli.Command) []string {
	var names []string
	for _, c := range cmds {
		names = append(names, c.Name)
	}
	return names
}

// isSubcommand reports whether name is one of commands() or help.
func isSubcommand(name string) bool {
	if name == "help" || name == "h" {
		return true
	}
	for _, c := range commands() {
		if c.HasName(name) {
			return true
		}
	}
	return false
}
