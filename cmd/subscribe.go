package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
	"github.com/urfave/cli/v3"
)

func subscribeCommand() *cli.Command {
	return &cli.Command{
		Name:      "subscribe",
		Usage:     "print each message published on NAME's bus on its own line",
		ArgsUsage: "NAME",
		Description: `Prints every message published on NAME, one per line, and keeps going
across leader changes; it waits for a leader when there is none. --count N
exits after N messages. --json prints NDJSON events, one per line:

   {"type":"message","name","pid","epoch","seq","data"}
   {"type":"leader","name","pid","epoch","since","mode","gap"}
   {"type":"lost","name","pid","epoch","reason"}

pid is the publisher's for a message, the leader's otherwise. Messages are
not kept: what is published while no subscriber listens is gone ("gap":
true on a leader event says some may have been missed). -v says on stderr
"listening to NAME's bus, led by pid P (epoch E)" once each leader's
messages reach this subscriber, so a script can publish after that line.

EXAMPLES:
   leaderrun subscribe applog
   leaderrun subscribe alerts --count 1
   leaderrun subscribe poller --json | jq -c 'select(.type=="message")'`,
		Flags: []cli.Flag{
			subDirFlag(),
			jsonFlag("print NDJSON events, leader announcements included"),
			&cli.IntFlag{Name: "count", Usage: "exit after `N` messages (0: never)"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "report on stderr each leader listened to, once its messages reach this subscriber"},
		},
		Action:        subscribeAction,
		ShellComplete: completeNames,
	}
}

func subscribeAction(ctx context.Context, c *cli.Command) error {
	if c.NArg() != 1 {
		return usageErrorf("leaderrun subscribe: give exactly one NAME, as in leaderrun subscribe alerts")
	}
	if c.Int("count") < 0 {
		return usageErrorf("leaderrun subscribe: --count %d is negative; give 0 (never stop) or more", c.Int("count"))
	}
	s, err := begin(ctx, c, "subscribe", c.Args().First(), false)
	if err != nil {
		return err
	}
	defer s.close()
	cl, err := dialSubscriber(s.ctx, c, s.bus, s.name)
	if err != nil {
		return err
	}
	defer cl.Close()
	out := &eventWriter{name: s.name, asJSON: c.Bool("json"), verbose: c.Bool("verbose"), enc: json.NewEncoder(os.Stdout)}
	count := c.Int("count")
	for {
		var ev bus.Event
		var ok bool
		select {
		case <-s.ctx.Done():
			return signalExit(s.ctx)
		case ev, ok = <-cl.Events():
			if !ok {
				return nil
			}
		}
		if err := out.write(ev); err != nil {
			return nil // stdout closed: the reader went away
		}
		if count > 0 && out.messages >= count {
			return nil
		}
	}
}

// eventWriter prints the events of subscribe: a message's data, one per
// line, or with --json one eventJSON per line for every event.
type eventWriter struct {
	name     string
	asJSON   bool
	verbose  bool // -v: tell stderr each leader listened to
	enc      *json.Encoder
	messages int // messages written
}

func (w *eventWriter) write(ev bus.Event) error {
	switch ev.Kind {
	case bus.EventMessage:
		w.messages++
		if !w.asJSON {
			_, err := os.Stdout.Write(append(ev.Message.Data, '\n'))
			return err
		}
		m := ev.Message
		j := eventJSON{Type: "message", Name: w.name, PID: m.PID, Epoch: m.Epoch, Seq: m.Seq, Data: string(m.Data)}
		if ev.Gap {
			j.Gap = &ev.Gap
		}
		return w.enc.Encode(j)
	case bus.EventLeader:
		if w.verbose {
			fmt.Fprintln(os.Stderr, "leaderrun subscribe: "+listeningTo(w.name, ev.Leader))
		}
		if w.asJSON {
			l := ev.Leader
			return w.enc.Encode(eventJSON{Type: "leader", Name: w.name, PID: l.PID, Host: l.Host, Epoch: l.Epoch, Since: &l.Since, Mode: l.Mode.String(), Gap: &ev.Gap})
		}
	case bus.EventLost:
		if w.asJSON {
			reason := ""
			if ev.Err != nil {
				reason = ev.Err.Error()
			}
			return w.enc.Encode(eventJSON{Type: "lost", Name: w.name, PID: ev.Leader.PID, Host: ev.Leader.Host, Epoch: ev.Leader.Epoch, Reason: reason})
		}
	}
	return nil
}

// eventJSON is one line of `subscribe --json`:
//
//	{"type":"message","name","pid","epoch","seq","data"[,"gap"]}
//	{"type":"leader","name","pid"[,"host"],"epoch","since","mode","gap"}
//	{"type":"lost","name","pid"[,"host"],"epoch","reason"}
//
// host is there only on a bus that spans hosts (leaderrun-etcd), and gap
// on a message only where such a bus lost part of the term before it.
type eventJSON struct {
	Type   string     `json:"type"`
	Name   string     `json:"name"`
	PID    int        `json:"pid"`
	Host   string     `json:"host,omitempty"`
	Epoch  uint64     `json:"epoch"`
	Seq    uint64     `json:"seq,omitempty"`
	Data   string     `json:"data,omitempty"`
	Since  *time.Time `json:"since,omitempty"`
	Mode   string     `json:"mode,omitempty"`
	Gap    *bool      `json:"gap,omitempty"`
	Reason string     `json:"reason,omitempty"`
}

// dialSubscriber connects to the leader of name, waiting for one. A
// leader that is stopped cannot answer: subscribe says so once and waits
// until it runs again or another leads. That wait polls Query; only a
// stopped leader costs it.
func dialSubscriber(ctx context.Context, c *cli.Command, b busPort, name string) (BusClient, error) {
	told := false
	for {
		// A leader stopped before it served its bus (it serves once
		// COMMAND has run a few ms) has no socket to wait for: ask once
		// without waiting, so that it is told as a stopped one is.
		cl, err := b.DialBus(ctx, name, BusOptions{})
		var h elect.Holder
		asked, ok := false, false
		if errors.Is(err, bus.ErrNoLeader) {
			if h, ok = stoppedLeader(ctx, c, name); !ok {
				cl, err = b.DialBus(ctx, name, BusOptions{WaitForLeader: true})
			}
			asked = ok // the backend was asked, and the answer stands
		}
		if err == nil {
			return cl, nil
		}
		if e := signalExit(ctx); e != nil {
			return nil, e
		}
		if !asked {
			h, ok = stoppedLeader(ctx, c, name)
		}
		if !ok {
			return nil, busError("subscribe", name, err)
		}
		if !told {
			fmt.Fprintln(os.Stderr, stoppedLine("subscribe", name, h)+"; waiting until it runs again or another leads")
			told = true
		}
		t := time.NewTicker(200 * time.Millisecond)
		for ok {
			select {
			case <-ctx.Done():
				t.Stop()
				if e := signalExit(ctx); e != nil {
					return nil, e
				}
				return nil, context.Cause(ctx)
			case <-t.C:
			}
			var now elect.Holder
			now, ok = stoppedLeader(ctx, c, name)
			ok = ok && now.PID == h.PID
		}
		t.Stop()
	}
}
