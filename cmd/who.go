package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/urfave/cli/v3"
)

func whoCommand() *cli.Command {
	return &cli.Command{
		Name:      "who",
		Usage:     "print the leader of NAME; exit 0 if one leads, 1 if none",
		ArgsUsage: "NAME",
		Description: `Prints the process that leads NAME. With shared holders, prints each of
them. Exits 0 when NAME is led, 1 when nobody leads it (and prints nothing
on stdout but with --json), so a script can test it:

   if leaderrun who backup >/dev/null; then echo "a backup is running"; fi

--json prints {"name","pid","epoch","since","mode","state","led":true}
for the leader (the first holder when several share the lock); STATE is
running or stopped (SIGSTOP, Ctrl-Z: it holds the lock but does not run).
A holder that is not leaderrun (flock(1) on the lock file) has
"external":true and no "since". When nobody leads, --json prints
{"name":NAME,"led":false} and the exit status is still 1.

EXAMPLES:
   leaderrun who poller
   leaderrun who poller --json | jq .epoch`,
		Flags:         []cli.Flag{subDirFlag(), jsonFlag(`print {"name","pid","epoch","since","mode","state","led"}; {"name","led":false} when nobody leads`)},
		Action:        whoAction,
		ShellComplete: completeNames,
	}
}

// whoJSON is the contract of `who --json`.
type whoJSON struct {
	Name     string     `json:"name"`
	PID      int        `json:"pid"`
	Epoch    uint64     `json:"epoch"`
	Since    time.Time  `json:"since,omitzero"` // unknown for an external holder
	Mode     elect.Mode `json:"mode"`
	State    string     `json:"state"`
	External bool       `json:"external,omitempty"`
	Host     string     `json:"host,omitempty"` // over etcd
	Led      bool       `json:"led"`            // always true; false in noLeaderJSON
}

// noLeaderJSON is `who --json` when nobody leads: {"name":N,"led":false},
// with exit 1, so that `leaderrun who N --json | jq` always gets an object.
type noLeaderJSON struct {
	Name string `json:"name"`
	Led  bool   `json:"led"`
}

func whoAction(ctx context.Context, c *cli.Command) error {
	if c.NArg() != 1 {
		return usageErrorf("leaderrun who: give exactly one NAME, as in leaderrun who backup (leaderrun status lists all names)")
	}
	s, err := begin(ctx, c, "who", c.Args().First(), true)
	if err != nil {
		return err
	}
	defer s.close()
	name := s.name
	snap, err := queryUntil(s.ctx, func(ctx context.Context) (elect.Snapshot, error) { return s.lk.Query(ctx, name) })
	if err != nil {
		return s.fail(c, err)
	}
	if len(snap.Held) == 0 {
		if c.Bool("json") {
			b, _ := json.Marshal(noLeaderJSON{Name: name})
			fmt.Printf("%s\n", b)
		}
		fmt.Fprintf(os.Stderr, "leaderrun: nobody leads %s in %s\n", name, s.lk.where())
		return silentExit(ExitNoLeader)
	}
	if c.Bool("json") {
		h := snap.Held[0]
		b, _ := json.Marshal(whoJSON{Name: h.Name, Led: true, PID: h.PID, Epoch: h.Epoch, Since: h.Since, Mode: h.Mode, State: h.State, External: h.External, Host: h.Host})
		fmt.Printf("%s\n", b)
		return nil
	}
	now := time.Now()
	for _, h := range snap.Held {
		line := h.Name + ": " + describeHolder(h)
		if h.State == "stopped" {
			line += ", stopped (SIGSTOP or Ctrl-Z: it holds the lock but does not run; kill -CONT " + strconv.Itoa(h.PID) + " resumes it)"
		}
		if !h.Since.IsZero() {
			line += ", since " + age(now, h.Since)
		}
		fmt.Println(line)
	}
	return nil
}
