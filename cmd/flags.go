package cmd

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v3"
)

// Flags are built afresh for each app: urfave/cli keeps parse state in
// them. --dir applies to every command, so the app and each subcommand
// declare it; only the app's reads LEADERRUN_DIR, so that an explicit
// --dir before the subcommand is not overridden by the environment (see
// lockDir).
func dirFlag() cli.Flag {
	f := subDirFlag().(*cli.StringFlag)
	f.Sources = cli.EnvVars("LEADERRUN_DIR")
	return f
}

func subDirFlag() cli.Flag {
	return &cli.StringFlag{
		Name:  "dir",
		Usage: "lock directory `DIR` (env LEADERRUN_DIR); must exist and be private (chmod 700) when given (default: ~/.local/state/leaderrun in the home of your passwd entry, else /run/lock/leaderrun-UID)",
	}
}

func jsonFlag(usage string) cli.Flag { return &cli.BoolFlag{Name: "json", Usage: usage} }

// runFlags are the flags of the default action, running COMMAND.
func runFlags() []cli.Flag {
	return append(append(lockFlags(), lineFlags()...), commandFlags()...)
}

// lockFlags say which lock: its name and directory.
func lockFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name:  "name",
			Usage: "lock `NAME` (default: derived from COMMAND and its ARGs; see NAMES below)",
		},
		dirFlag(),
		&cli.BoolFlag{
			Name:    "group-shared",
			Usage:   "accept a lock directory its group may write to, shared by several users of one group (before a subcommand, for every command)",
			Sources: cli.EnvVars("LEADERRUN_GROUP_SHARED"),
		},
		&cli.BoolFlag{
			Name:    "allow-unsafe-fs",
			Usage:   "use a lock directory on NFS, SMB, FUSE and the like, where flock may not exclude other machines' processes, at your own risk",
			Sources: cli.EnvVars("LEADERRUN_ALLOW_UNSAFE_FS"),
		},
	}
}

// lineFlags say how to wait in line, and in which mode to lead.
func lineFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{
			Name:    "nonblock",
			Aliases: []string{"n", "nb"},
			Usage:   "do not queue: if another instance leads, exit with the conflict code",
		},
		&cli.GenericFlag{
			Name:    "wait",
			Aliases: []string{"w", "timeout"},
			Usage:   "give up after waiting `DURATION` (\"1.5\" seconds or \"1500ms\") and exit with the conflict code",
			Value:   &durationValue{},
		},
		&cli.IntFlag{
			Name:    "conflict-exit-code",
			Aliases: []string{"E"},
			Usage:   "exit code `N` (0-255) for -n and -w failures",
			Value:   ExitConflict,
		},
		&cli.BoolFlag{
			Name:    "shared",
			Aliases: []string{"s"},
			Usage:   "shared mode: run alongside other shared instances, never with an exclusive one",
		},
		&cli.BoolFlag{
			Name:    "exclusive",
			Aliases: []string{"x", "e"},
			Usage:   "exclusive mode, the default (as flock(1)'s -x and -e); not with -s",
		},
		&cli.BoolFlag{
			Name:  "steal",
			Usage: "preempt the current holder (its COMMAND is stopped, it exits 79), then run ahead of the queue; a holder that has not let go after twice --grace (say, a stopped one) is killed",
		},
		&cli.GenericFlag{
			Name:    "steal-stopped",
			Usage:   "while first in line, take the lock from a holder that has been stopped (SIGSTOP, Ctrl-Z) for `DURATION`: its term ends and it is killed (same user only); checks the holder every quarter of DURATION, only then",
			Value:   &durationValue{},
			Sources: cli.EnvVars("LEADERRUN_STEAL_STOPPED"),
		},
	}
}

// commandFlags say how to run COMMAND while leading.
func commandFlags() []cli.Flag {
	return []cli.Flag{
		&cli.GenericFlag{
			Name:  "grace",
			Usage: "`DURATION` between SIGTERM and SIGKILL when stopping COMMAND's process group, and that COMMAND has after leaderrun is told to stop (a second signal: SIGKILL at once)",
			Value: &durationValue{d: 5 * time.Second, set: true},
		},
		&cli.StringFlag{
			Name:  "restart",
			Usage: "`MODE`: never | on-failure | always; keep leading and restart COMMAND, with a capped exponential back-off",
			Value: "never",
		},
		&cli.StringFlag{
			Name:  "notify-ready",
			Usage: "with NOTIFY_SOCKET (systemd Type=notify), when to send READY=1: `MODE` lead (when this instance starts leading), start (at once) or command (never: COMMAND gets NOTIFY_SOCKET and reports itself; needs NotifyAccess=all); STATUS= and STOPPING=1 are sent in every mode",
			Value: readyLead,
		},
		&cli.BoolFlag{
			Name:    "lazy-watchdog",
			Usage:   "while waiting in a lock directory's line, keep no watchdog ready (the process that stops COMMAND should leaderrun die; about 0.7 MB of memory of its own): start it when granted, before COMMAND, which then starts that much later",
			Sources: cli.EnvVars("LEADERRUN_LAZY_WATCHDOG"),
		},
		&cli.BoolFlag{
			Name:  "fanout",
			Usage: "as leader, publish every stdout line of COMMAND on the bus; while waiting, print the leader's published lines",
		},
		&cli.BoolFlag{
			Name:    "verbose",
			Aliases: []string{"v"},
			Usage:   "report on stderr: queue position, who leads, leadership changes; with --fanout, each leader's bus listened to",
		},
	}
}

// durationValue parses "1.5" as seconds and "1500ms" as a Go duration, so
// that users of flock(1) -w and timeout(1) can keep their numbers.
type durationValue struct {
	d   time.Duration
	set bool
}

func (v *durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	v.d, v.set = d, true
	return nil
}

// Get is v itself, for durationFlag.
func (v *durationValue) Get() any { return v }

func (v *durationValue) String() string {
	if v == nil || !v.set {
		return ""
	}
	return v.d.String()
}

func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		switch {
		case math.IsNaN(f):
			// Converting NaN to an integer is implementation-defined
			// (Go spec): arm64 gives 0, which -w would take for -n.
			return 0, fmt.Errorf("%q is not a duration; write seconds (\"1.5\") or a unit (\"1500ms\", \"2m\")", s)
		case f > float64(1<<62)/float64(time.Second):
			return 0, fmt.Errorf("%q is too long", s)
		case f < 0:
			// Not converted: -Inf, like NaN, has no integer.
			return 0, fmt.Errorf("%q is negative", s)
		}
		d = time.Duration(f * float64(time.Second))
	} else if d, err = time.ParseDuration(s); err != nil {
		return 0, fmt.Errorf("%q is not a duration; write seconds (\"1.5\") or a unit (\"1500ms\", \"2m\")", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return d, nil
}

// durationFlag returns the value of a durationValue flag and whether it was
// given (or has a default).
func durationFlag(c *cli.Command, name string) (time.Duration, bool) {
	v, _ := c.Generic(name).(*durationValue)
	if v == nil {
		return 0, false
	}
	return v.d, v.set
}

// lockDir is the --dir in force for c: the one given closest to the
// subcommand (`leaderrun who NAME --dir D`, then `leaderrun --dir D who
// NAME`), else LEADERRUN_DIR, else "" for the default.
func lockDir(c *cli.Command) string {
	for _, cc := range c.Lineage() {
		if slices.Contains(cc.LocalFlagNames(), "dir") {
			return cc.String("dir")
		}
	}
	return os.Getenv("LEADERRUN_DIR")
}
