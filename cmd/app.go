package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

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
	open    Opener // nil: elect.Open's flock backend
	flags   []BackendFlag
	usage   string
	ender   func(ctx context.Context, token string) error
	prepare TermEndPreparer
	// helpErr is `leaderrun help NOSUCH`'s usage error (noHelpTopic).
	helpErr error
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
			c.Description = runDescription + "\n" + envHelp() + "\n" + exitCodeHelp()
			defer func() { c.Description = runDescription }()
		}
		printHelp(w, templ, data)
	}
}

// appHelpTemplate is the app's --help without a VERSION section: the
// version is read from the build info only for --version (VersionPrinter),
// and the placeholder in Version is not shown.
var appHelpTemplate = strings.Replace(cli.RootCommandHelpTemplate, "{{if .Version}}{{if not .HideVersion}}\n\nVERSION:\n   {{.Version}}{{end}}{{end}}", "", 1)

// stopAtCommand makes the app stop parsing its flags at COMMAND (`leaderrun
// -n sleep -n 5` gives -n to sleep), as flock(1) and timeout(1) do; the
// subcommands take their flags anywhere before a --.
var stopAtCommand = 1

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
	backendFlags := a.cliFlags()
	if len(a.flags) == 0 {
		backendFlags = handoverFlagDefs() // handover.go
	}
	root.Flags = append(root.Flags, backendFlags...)
	for _, c := range root.Commands {
		c.OnUsageError = onUsageError
		c.Before = checkDirFlags
		// `leaderrun who NAME --help` asks for who's help, not for a
		// topic NAME.
		c.CommandNotFound = subcommandHelp
		if c.ShellComplete == nil {
			c.ShellComplete = completeCommands // its flags, and help
		}
		if c.Name != "completion" {
			c.Flags = append(c.Flags, a.cliFlags()...)
			if len(a.flags) == 0 {
				c.Flags = append(c.Flags, handoverFlagDefs()...)
			}
		}
	}
	root.Commands = append(root.Commands, helpCommand())
	// urfave/cli flags apply to the subcommands too unless local: the
	// app's flags are its own (status has no -n), each subcommand has its
	// own --dir and backend flags.
	localFlags(root)
	if a.usage != "" {
		root.Usage = a.usage
	}
	a.root = root
	return a
}

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
	if code, ok := a.runLateRole(); ok {
		return code
	}
	if err := supervise.PidsLimit(); err != nil {
		err = exitf(ExitOSErr, "leaderrun: %v", err)
		printErr(err)
		return ExitCode(err)
	}
	if len(opts) == 0 {
		handOver(os.Args) // returns only if there is nothing to hand over to
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
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
	args = passThrough(protectDashDash(completionArgs(args), a.root.Flags), a.root)
	if runsCommand(args, a.root) {
		// urfave/cli sets up every subcommand before it parses (their
		// help, their flags): not for a line that runs COMMAND.
		a.root.Commands = nil
	}
	err := a.root.Run(ctx, args)
	if a.helpErr != nil {
		return a.helpErr
	}
	return err
}

// passThrough puts a -- in front of the first word after send's NAME or
// publish's NAME that looks like a flag the command does not have, so that
// it and what follows are ARGs (MESSAGE words), as before urfave/cli v3,
// which refuses such a word: `leaderrun send app --new-window` hands
// --new-window to the primary. The command's own flags (--forward-stdin)
// are still its own anywhere before that word or a --.
func passThrough(args []string, root *cli.Command) []string {
	at := subcommandAt(args, root.Flags)
	if at >= len(args) || args[at] != "send" && args[at] != "publish" {
		return args
	}
	takesValue := takesValueOf(root.Command(args[at]).Flags)
	takesValue["help"], takesValue["h"] = false, false
	named := false
	for i := at + 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return args
		}
		if !isFlagWord(a) {
			named = true
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		value, known := takesValue[name]
		if !known && named {
			out := append(slices.Clone(args[:i]), "--")
			return append(out, args[i:]...)
		}
		if value && !hasValue {
			i++
		}
	}
	return args
}

// subcommandAt is the index in args of the first word after the app's
// own flags (`leaderrun --dir D who NAME --json`): the subcommand, if
// any, or COMMAND, or a --.
func subcommandAt(args []string, appFlags []cli.Flag) int {
	at := 1
	appValue := takesValueOf(appFlags)
	for at < len(args) && strings.HasPrefix(args[at], "-") && args[at] != "-" && args[at] != "--" {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[at], "-"), "=")
		if appValue[name] && !hasValue {
			at++
		}
		at++
	}
	return at
}

// runsCommand reports whether args is a line of the default action that
// asks for no help, version or completion: the app's flags, then COMMAND
// or a -- (or nothing, for the usage error).
func runsCommand(args []string, root *cli.Command) bool {
	if n := len(args); n > 1 && args[n-1] == "--generate-shell-completion" {
		return false
	}
	at := subcommandAt(args, root.Flags)
	for _, w := range args[1:min(at, len(args))] {
		if !strings.HasPrefix(w, "-") {
			continue // a flag's value
		}
		name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
		if name == "help" || name == "h" || name == "version" || !strings.HasPrefix(w, "--") && strings.Contains(name, "h") {
			return false // -h, or a group with it (-nh)
		}
	}
	return at >= len(args) || args[at] == "--" || args[at] != "help" && args[at] != "h" && root.Command(args[at]) == nil
}

// isFlagWord reports whether urfave/cli takes a for a flag: a dash, or
// two, then a letter.
func isFlagWord(a string) bool {
	r, _ := utf8.DecodeRuneInString(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"))
	return strings.HasPrefix(a, "-") && unicode.IsLetter(r)
}

// protectDashDash doubles the `--` that ends leaderrun's own flags, so that
// urfave/cli, which drops it while parsing, leaves one in front of COMMAND
// and does not take a COMMAND named like a subcommand (who, status) for
// that subcommand. runAction removes it again.
func protectDashDash(args []string, flags []cli.Flag) []string {
	takesValue := takesValueOf(flags)
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

// subcommandNames lists the names of cmds.
func subcommandNames(cmds []*cli.Command) []string {
	var names []string
	for _, c := range cmds {
		names = append(names, c.Name)
	}
	return names
}

// The flag-arity map: protectDashDash and the completion ask it whether
// a flag takes a value.
//
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

const runDescription = `Runs COMMAND when this instance leads NAME; other instances wait in line
(first come, first served) or give up (-n, -w). When leaderrun dies, even
of SIGKILL, COMMAND is stopped before another instance's COMMAND starts.

COMMAND runs in its own process group. SIGINT, SIGTERM, SIGHUP, SIGQUIT,
SIGUSR1 and SIGUSR2 are forwarded to that group; when COMMAND exits, is
stolen from, or leaderrun is told to stop, the whole group gets SIGTERM,
then SIGKILL after --grace. COMMAND does not inherit the lock: a stray
background process can never keep the lock after its leader is gone.

COMMAND's environment gains LEADERRUN_NAME, LEADERRUN_EPOCH (the fencing
token: it grows with every new leader), LEADERRUN_DIR, LEADERRUN_PID and
LEADERRUN_TERM; with --single-instance also LEADERRUN_INVOCATIONS_FD and
LEADERRUN_REPLIES_FD (see ENVIRONMENT below). COMMAND gets the terminal
when leaderrun is in the terminal's foreground, whatever its stdin is,
unless leaderrun writes into a pipeline (leaderrun -- cmd | less).

NAMES:
   Without --name, the name is BASE-HASH: BASE is COMMAND's last path
   element (bytes outside [A-Za-z0-9._@+=,:-] become _), HASH the first 8
   hex digits of the SHA-256 of COMMAND and its ARGs, each followed by a
   NUL byte. Give --name to share a lock between different command lines.
   The lock file is DIR/NAME.lock; flock(1) on it excludes leaderrun and
   the other way round.

DURATIONS:
   "1.5" is seconds; "1500ms", "2m", "1h30m" use Go's units.

` + singleHelp + `
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
   [ "$LEADERRUN_NAME" = job ] || exec leaderrun --name job -- "$0" "$@"

   # who leads, and who waits; the lock file, for flock(1)
   leaderrun status
   leaderrun who poller
   flock -n "$(leaderrun lockfile backup)" ./backup.sh
`
