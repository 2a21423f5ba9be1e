package cmd

import (
	"fmt"
	"os"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/supervise"
	"github.com/urfave/cli/v3"
)

// The default action's command line: its flags read, checked and fitted to
// the backend (runOptions).

// Back-off between restarts: doubled after each run, back to the start
// after a run that lasted resetAfter.
const (
	backoffStart = 100 * time.Millisecond
	backoffMax   = 30 * time.Second
	resetAfter   = 10 * time.Second
)

// stuckAcquire is how long a request told to stop by a signal may take to
// end before leaderrun exits without it.
const stuckAcquire = 2 * time.Second

// runOptions is the validated command line of the default action.
type runOptions struct {
	argv     []string
	name     string
	dir      string // --dir, LEADERRUN_DIR, or "" for the default
	open     func() (*opened, error)
	req      elect.Request
	wait     time.Duration
	waitSet  bool
	conflict int
	// commandStarted: COMMAND ran in the current term (see term).
	commandStarted bool
	grace          time.Duration
	graceSet       bool // --grace was given
	restart        string
	fanout         bool
	verbose        bool
	prepared       *supervise.Prepared // the next term, prepared while waiting
	exits          bool                // the process exits once the action returns (App.exits)
	early          *caught             // the forwarded signals Main caught early (App.early), or nil
	// exclusive: -x/-e was given; the mode is exclusive anyway unless
	// -s, which contradicts it.
	exclusive bool
	ready     string    // --notify-ready
	lazyWD    bool      // --lazy-watchdog
	notify    *notifier // NOTIFY_SOCKET (sdnotify.go), or nil
}

// runOptionsFrom reads and checks the command line of the default action.
func runOptionsFrom(c *cli.Command) (*runOptions, error) {
	argv := c.Args().Slice()
	dashed := len(argv) > 0 && argv[0] == "--" // see protectDashDash
	if dashed {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return nil, usageErrorf("leaderrun: no COMMAND given; write leaderrun [flags] -- COMMAND [ARG...], or see leaderrun --help")
	}
	if !dashed && len(argv[0]) > 1 && argv[0][0] == '-' {
		// urfave/cli v3 takes a dash and a digit (-5) for an argument;
		// before --, it is a flag leaderrun does not know.
		return nil, usageErrorf("leaderrun: flag provided but not defined: %s; see leaderrun --help", argv[0])
	}
	if !dashed && argv[0] == "version" {
		return nil, usageErrorf("leaderrun: version is not a subcommand; for leaderrun's version write leaderrun --version, to run a program named version write leaderrun -- version")
	}
	if c.IsSet("name") && c.String("name") == "" {
		return nil, usageErrorf("leaderrun: --name is empty; give a NAME such as --name backup, or leave --name out to derive one from COMMAND")
	}
	o := readRunFlags(c, argv)
	if err := o.check(); err != nil {
		return nil, err
	}
	if err := elect.ValidateName(o.name); err != nil {
		return nil, usageErrorf("leaderrun: --name: %v", err)
	}
	if err := checkCommand(argv[0], dashed); err != nil {
		return nil, err
	}
	return o, nil
}

// exitsAfter reports whether the process exits once c's action returns.
func exitsAfter(c *cli.Command) bool {
	a, ok := c.Root().Metadata[backendKey].(*App)
	return ok && a.exits
}

// caughtEarly is what Main caught for c's line from its start (catchEarly),
// or nil.
func caughtEarly(c *cli.Command) *caught {
	if a, ok := c.Root().Metadata[backendKey].(*App); ok {
		return a.early
	}
	return nil
}

// readRunFlags copies the default action's flags into runOptions.
func readRunFlags(c *cli.Command, argv []string) *runOptions {
	o := &runOptions{
		argv:     argv,
		name:     c.String("name"),
		dir:      lockDir(c),
		open:     func() (*opened, error) { return openLocker(c) },
		exits:    exitsAfter(c),
		early:    caughtEarly(c),
		conflict: c.Int("conflict-exit-code"),
		restart:  c.String("restart"),
		fanout:   c.Bool("fanout"),
		lazyWD:   c.Bool("lazy-watchdog"),
		verbose:  c.Bool("verbose"),
		req:      elect.Request{IfAvailable: c.Bool("nonblock"), Steal: c.Bool("steal"), Command: argv},
	}
	o.wait, o.waitSet = durationFlag(c, "wait")
	o.grace, _ = durationFlag(c, "grace")
	o.graceSet = c.IsSet("grace")
	o.req.StealStopped, _ = durationFlag(c, "steal-stopped")
	if c.Bool("shared") {
		o.req.Mode = elect.Shared
	}
	o.exclusive = c.Bool("exclusive")
	o.ready = c.String("notify-ready")
	o.notify = newNotifier(o.ready)
	if o.req.Steal {
		// A holder that has not let go after twice our grace (stopped,
		// or a COMMAND that ignores SIGTERM under a longer --grace) is
		// killed; its COMMAND dies with it and the orphan fence waits
		// for that before ours starts.
		o.req.KillAfter = max(2*o.grace, time.Second)
	}
	if o.name == "" {
		o.name = deriveName(argv)
	}
	o.req.OnPolling = func(why string) {
		o.logf("waiting for %s by polling (every 1ms to 100ms): %s", o.name, why)
	}
	return o
}

// fitGrace takes the --grace that a GraceFitter backend fits its terms to.
func (o *runOptions) fitGrace(lk *opened) error {
	g, note, err := lk.fitGrace(o.grace, o.graceSet)
	if err != nil || g == o.grace {
		return err
	}
	o.logf("%s", note)
	o.grace = g
	if o.req.Steal {
		o.req.KillAfter = max(2*o.grace, time.Second)
	}
	return nil
}

// check refuses contradictory flags, and turns -w 0 into -n.
func (o *runOptions) check() error {
	if o.conflict < 0 || o.conflict > 255 {
		return usageErrorf("leaderrun: -E %d is out of range; give an exit code from 0 to 255", o.conflict)
	}
	for _, check := range []func() error{o.checkWaiting, o.checkMode, o.checkValues} {
		if err := check(); err != nil {
			return err
		}
	}
	if o.waitSet && o.wait == 0 {
		o.req.IfAvailable, o.waitSet = true, false
	}
	return nil
}

// checkWaiting refuses flags that contradict each other on whether to
// wait in line: -n, -w, --steal, --steal-stopped.
func (o *runOptions) checkWaiting() error {
	switch {
	case o.req.IfAvailable && o.waitSet:
		return usageErrorf("leaderrun: -n and -w contradict each other; use -n to never wait, or -w DURATION to wait that long")
	case o.req.StealStopped > 0 && o.req.IfAvailable:
		return usageErrorf("leaderrun: --steal-stopped and -n contradict each other; -n never waits behind a holder")
	case o.req.Steal && o.req.IfAvailable:
		return usageErrorf("leaderrun: --steal and -n contradict each other; --steal always takes the lock")
	case o.req.Steal && o.waitSet:
		return usageErrorf("leaderrun: --steal and -w contradict each other; --steal always takes the lock")
	}
	return nil
}

// checkMode refuses what a shared holder cannot do.
func (o *runOptions) checkMode() error {
	if o.req.Mode != elect.Shared {
		return nil
	}
	switch {
	case o.exclusive:
		return usageErrorf("leaderrun: -s (shared) and -x (exclusive) contradict each other; give one of them (exclusive is the default)")
	case o.req.Steal:
		return usageErrorf("leaderrun: --steal works only in exclusive mode; drop -s")
	case o.fanout:
		return usageErrorf("leaderrun: --fanout works only in exclusive mode (shared holders serve no bus); drop -s or --fanout")
	}
	return nil
}

// checkValues refuses a mode that is none.
func (o *runOptions) checkValues() error {
	switch {
	case o.ready != readyLead && o.ready != readyStart && o.ready != readyCommand:
		return usageErrorf("leaderrun: --notify-ready %q is not a mode; use lead, start or command", o.ready)
	case o.restart != "never" && o.restart != "on-failure" && o.restart != "always":
		return usageErrorf("leaderrun: --restart %q is not a mode; use never, on-failure or always", o.restart)
	}
	return nil
}

func (o *runOptions) logf(format string, args ...any) {
	if o.verbose {
		fmt.Fprintf(os.Stderr, "leaderrun: "+format+"\n", args...)
	}
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
