package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/urfave/cli/v2"
)

func whoCommand() *cli.Command {
	return &cli.Command{
		Name:      "who",
		Usage:     "print the leader of NAME; exit 0 if one leads, 1 if none",
		ArgsUsage: "NAME",
		Description: `Prints the process that leads NAME. With shared holders, prints each of
them. Exits 0 when NAME is led, 1 when nobody leads it (and prints nothing
on stdout), so a script can test it:

   if leaderrun who backup >/dev/null; then echo "a backup is running"; fi

--json prints {"name","pid","epoch","since","mode"} for the leader (the
first holder when several share the lock).

EXAMPLES:
   leaderrun who poller
   leaderrun who poller --json | jq .epoch`,
		Flags:  []cli.Flag{subDirFlag(), jsonFlag(`print {"name","pid","epoch","since","mode"}`)},
		Action: whoAction,
	}
}

// whoJSON is the contract of `who --json`.
type whoJSON struct {
	Name  string     `json:"name"`
	PID   int        `json:"pid"`
	Epoch uint64     `json:"epoch"`
	Since time.Time  `json:"since"`
	Mode  elect.Mode `json:"mode"`
}

func whoAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErrorf("leaderrun who: give exactly one NAME, as in leaderrun who backup (leaderrun status lists all names)")
	}
	name := c.Args().First()
	if err := elect.ValidateName(name); err != nil {
		return usageErrorf("leaderrun who: %v", err)
	}
	lk, err := openLocker(c)
	if err != nil {
		return explainCtx(c, err)
	}
	defer lk.Close()
	ctx, stop := signalContext(c.Context)
	defer stop()
	snap, err := queryUntil(ctx, func(ctx context.Context) (elect.Snapshot, error) { return lk.Query(ctx, name) })
	if err != nil {
		if e := signalExit(ctx); e != nil {
			return e
		}
		return explainCtx(c, err)
	}
	if len(snap.Held) == 0 {
		fmt.Fprintf(os.Stderr, "leaderrun: nobody leads %s in %s\n", name, lk.Dir())
		return silentExit(ExitNoLeader)
	}
	if c.Bool("json") {
		h := snap.Held[0]
		b, _ := json.Marshal(whoJSON{Name: h.Name, PID: h.PID, Epoch: h.Epoch, Since: h.Since, Mode: h.Mode})
		fmt.Printf("%s\n", b)
		return nil
	}
	now := time.Now()
	for _, h := range snap.Held {
		fmt.Printf("%s: %s, since %s\n", h.Name, describeHolder(h), age(now, h.Since))
	}
	return nil
}
