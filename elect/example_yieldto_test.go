package elect_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/leaderrun/leaderrun/elect"
)

// A leader hands its work to the focused window's process, wherever that
// waits in line; the windows it passes keep their places. (Here the
// windows are goroutines of one process; in an app each is a process.)
func ExampleElector_YieldTo() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	l, _ := elect.Open(elect.Config{Dir: dir})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	window := func(label string, led chan<- string) {
		e := &elect.Elector{Backend: l, Name: "editor", AcceptHandoff: true, Request: elect.Request{Labels: []string{label}}}
		e.Run(ctx, func(ctx context.Context, lead *elect.Leadership) error {
			led <- label
			return nil // one term, then done
		})
	}
	leader := &elect.Elector{Backend: l, Name: "editor"}
	leading := make(chan *elect.Leadership)
	done := make(chan error)
	go func() {
		done <- leader.Run(ctx, func(ctx context.Context, lead *elect.Leadership) error {
			leading <- lead
			<-ctx.Done() // handed over
			return nil
		})
	}()
	<-leading

	led := make(chan string, 2)
	updates, _ := l.Watch(ctx, "editor")
	go window("background", led) // first in line
	for s := range updates {
		if len(s.Pending) == 1 {
			break
		}
	}
	go window("focused", led) // second
	for s := range updates {
		if len(s.Pending) == 2 {
			break
		}
	}
	ok, err := leader.YieldTo(ctx, func(p elect.Pending) bool { return slices.Contains(p.Labels, "focused") })
	fmt.Println("yielded:", ok, err, "| old leader:", <-done)
	fmt.Println("next:", <-led)
	fmt.Println("then:", <-led)
	// Output:
	// yielded: true <nil> | old leader: <nil>
	// next: focused
	// then: background
}
