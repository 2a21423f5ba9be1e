package bus_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
)

// A leader that polls and fans out: every process listens with DialLazy
// (which never waits, so campaigning after it cannot deadlock) and
// campaigns with RunElector; whoever leads polls the source and retains
// each result, so that followers that join late get the current one at
// once. Here one process plays both parts.
func ExampleRunElector() {
	dir, _ := os.MkdirTemp("", "bus-example-")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	follower, err := bus.DialLazy(dir, "weather")
	if err != nil {
		log.Fatal(err)
	}
	defer follower.Close()

	lk, _ := elect.Open(elect.Config{Dir: dir})
	defer lk.Close()
	e := &elect.Elector{Backend: lk, Name: "weather", Requeue: true}
	go bus.RunElector(ctx, e, func(ctx context.Context, l *elect.Leadership, s *bus.Server) error {
		for i := 1; ; i++ {
			s.Retain(fmt.Appendf(nil, "poll %d: sunny", i)) // the expensive poll, done once
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(10 * time.Millisecond):
			}
		}
	})

	seen := 0
	for ev := range follower.Events() {
		switch ev.Kind {
		case bus.EventLeader:
			// The current value at once (ErrNoRetained before the first).
			v, _, err := follower.Retained(ctx)
			fmt.Println("joined; current value or none yet:", len(v) > 0 || errors.Is(err, bus.ErrNoRetained))
		case bus.EventMessage:
			if _, ok := bus.RetainedUpdate(ev.Message); ok {
				if seen++; seen == 3 {
					fmt.Println("three updates fanned out")
					return
				}
			}
		}
	}
	// Output:
	// joined; current value or none yet: true
	// three updates fanned out
}
