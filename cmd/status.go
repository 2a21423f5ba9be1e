package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/urfave/cli/v3"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show holders and queues (all names when NAME is omitted)",
		ArgsUsage: "[NAME]",
		Description: `Prints one line per holder and per waiting instance, holders first, the
waiting ones in queue order. STATE is running, or stopped when the process is
suspended (SIGSTOP, a debugger) and still holds the lock. A holder that is
not leaderrun, such as flock(1) on the lock file, shows EPOCH -.

--json prints {"held":[{"name","mode","pid","epoch","since","command",
"state"}],"pending":[{"name","mode","pid","ticket","since",...}]}, the shape
of the Web Locks navigator.locks.query(). --watch redraws on every change,
and on a terminal every second too, so that SINCE keeps counting; with
--json it prints one snapshot per line, on every change. A snapshot describes the past:
show it, do not decide on it (use -n for that).

EXAMPLES:
   leaderrun status
   leaderrun status backup --json | jq '.held[0].pid'
   leaderrun status --watch`,
		Flags: []cli.Flag{
			subDirFlag(),
			jsonFlag("print the snapshot as JSON"),
			&cli.BoolFlag{Name: "watch", Usage: "keep printing: redraw on every change until interrupted"},
		},
		Action:        statusAction,
		ShellComplete: completeNames,
	}
}

func statusAction(ctx context.Context, c *cli.Command) error {
	if c.NArg() > 1 {
		return usageErrorf("leaderrun status: takes at most one NAME, got %d arguments", c.NArg())
	}
	s, err := begin(ctx, c, "status", c.Args().First(), true)
	if err != nil {
		return err
	}
	defer s.close()
	name, lk := s.name, s.lk
	query := func(ctx context.Context) (elect.Snapshot, error) {
		return queryUntil(ctx, func(ctx context.Context) (elect.Snapshot, error) {
			if name == "" {
				return lk.QueryAll(ctx)
			}
			return lk.Query(ctx, name)
		})
	}
	asJSON := c.Bool("json")
	if !c.Bool("watch") {
		snap, err := query(s.ctx)
		if err != nil {
			return s.fail(c, err)
		}
		return printSnapshot(os.Stdout, snap, asJSON, s.lk.where())
	}
	return watchStatus(s.ctx, lk, query, asJSON)
}

func normalize(s elect.Snapshot) elect.Snapshot {
	if s.Held == nil {
		s.Held = []elect.Holder{}
	}
	if s.Pending == nil {
		s.Pending = []elect.Pending{}
	}
	return s
}

func printSnapshot(w io.Writer, snap elect.Snapshot, asJSON bool, dir string) error {
	snap = normalize(snap)
	if asJSON {
		b, err := json.Marshal(snap)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	if len(snap.Held) == 0 && len(snap.Pending) == 0 {
		_, err := fmt.Fprintf(w, "no locks held or awaited in %s\n", dir)
		return err
	}
	now := time.Now()
	// A HOST column only for a backend that spans hosts (etcd).
	hosts := slices.ContainsFunc(snap.Held, func(h elect.Holder) bool { return h.Host != "" }) ||
		slices.ContainsFunc(snap.Pending, func(p elect.Pending) bool { return p.Host != "" })
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	row := func(cols ...string) {
		if !hosts {
			cols = slices.Delete(cols, 4, 5)
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	row("NAME", "ROLE", "MODE", "PID", "HOST", "EPOCH", "STATE", "SINCE", "COMMAND")
	for _, h := range snap.Held {
		epoch := strconv.FormatUint(h.Epoch, 10)
		if h.External {
			epoch = "-"
		}
		row(h.Name, "holder", h.Mode.String(), strconv.Itoa(h.PID), orDash(h.Host), epoch, h.State, age(now, h.Since), commandLine(h.Command))
	}
	pos := map[string]int{}
	for _, p := range snap.Pending {
		pos[p.Name]++
		role := fmt.Sprintf("waiting #%d", pos[p.Name])
		if p.Steal {
			role += " (steal)"
		}
		state := p.State
		if p.Polling {
			state += ",polling" // nothing to sleep on: it checks every 1-100ms
		}
		row(p.Name, role, p.Mode.String(), strconv.Itoa(p.PID), orDash(p.Host), "-", state, age(now, p.Since), commandLine(p.Command))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return d.Truncate(100*time.Millisecond).String() + " ago"
	case d < time.Hour:
		return d.Truncate(time.Second).String() + " ago"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func commandLine(argv []string) string {
	if len(argv) == 0 {
		return "-"
	}
	return strings.Join(argv, " ")
}

// watchStatus prints a snapshot, then another whenever the lock directory
// changes (watchTree: on Linux the process's one inotify instance,
// elsewhere fsnotify) and the snapshot differs. flock(2) itself makes no
// filesystem event, so a slow tick catches holders that are not
// leaderrun, such as flock(1).
func watchStatus(ctx context.Context, lk *opened, query func(context.Context) (elect.Snapshot, error), asJSON bool) error {
	w, err := watchTree(lk.Dir())
	if err != nil {
		if e := resourceError(err); e != nil {
			return e
		}
		return exitf(ExitSoftware, "leaderrun status --watch: %v", err)
	}
	defer w.close()
	v := &statusView{tty: isTerminal(os.Stdout), asJSON: asJSON, where: lk.where()}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		snap, err := query(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return explainIn(lk.Dir(), true, err)
		}
		if !v.show(normalize(snap)) {
			return nil // stdout closed: the reader went away
		}
		if !w.wait(ctx, tick.C) {
			return nil
		}
	}
}

// statusView is what status --watch has shown.
type statusView struct {
	tty, asJSON bool
	where       string
	last        *elect.Snapshot
	shown       string
}

// show prints snap if it is news. On a terminal the table is redrawn
// whenever its text changes, so that SINCE keeps counting (the tick); a
// log or a pipe gets a new table, and JSON a new line, only when the
// snapshot does. It reports false once stdout is closed.
func (v *statusView) show(snap elect.Snapshot) bool {
	var text bytes.Buffer
	_ = printSnapshot(&text, snap, v.asJSON, v.where)
	if v.last != nil && reflect.DeepEqual(snap, *v.last) && (!v.tty || v.asJSON || text.String() == v.shown) {
		return true
	}
	if !v.asJSON {
		if v.tty {
			fmt.Print("\033[H\033[2J")
		} else if v.last != nil {
			fmt.Println()
		}
	}
	if _, err := os.Stdout.Write(text.Bytes()); err != nil {
		return false
	}
	v.last, v.shown = &snap, text.String()
	return true
}

// coalesceQuiet and coalesceMax bound a burst of events: it ends once no
// event came for coalesceQuiet, or coalesceMax after its first.
const (
	coalesceQuiet = 10 * time.Millisecond
	coalesceMax   = 100 * time.Millisecond
)

// coalesce takes in the rest of the burst of events that one change makes
// (a grant writes, renames and removes several entries) from c, each
// passed to seen, so that one snapshot follows it; it returns once the
// burst is over or ctx ends.
func coalesce[T any](ctx context.Context, c <-chan T, seen func(T)) {
	quiet := time.NewTimer(coalesceQuiet)
	defer quiet.Stop()
	limit := time.NewTimer(coalesceMax)
	defer limit.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-quiet.C:
			return
		case <-limit.C:
			return
		case ev := <-c:
			seen(ev)
			quiet.Reset(coalesceQuiet)
		}
	}
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
