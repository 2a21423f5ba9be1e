package bus_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
)

// The leader of "indexer" does the work once, publishes the results to
// everyone listening, and answers requests such as a second instance
// handing over the file it was asked to open.
func ExampleListen() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "leaderrun-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	locks, err := elect.Open(elect.Config{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()
	lead, err := locks.Acquire(ctx, "indexer", elect.Request{})
	if err != nil {
		log.Fatal(err)
	}
	defer lead.Release()

	srv, err := bus.Listen(lead, bus.WithHandler(func(ctx context.Context, req bus.Request) ([]byte, error) {
		return fmt.Appendf(nil, "opening %s", req.Data), nil
	}))
	if err != nil {
		log.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }() // until ctx or the leadership ends
	defer func() { srv.Close(); <-served }()

	// Somewhere else, a member listens (see the Dial example).
	member, err := bus.Dial(ctx, dir, "indexer")
	if err != nil {
		log.Fatal(err)
	}
	defer member.Close()
	<-member.Events() // EventLeader

	seq, err := srv.Publish([]byte("index rebuilt"))
	if err != nil {
		log.Fatal(err)
	}
	ev := <-member.Events()
	fmt.Println(seq, ev.Message.Seq, string(ev.Message.Data))
	// Output: 1 1 index rebuilt
}

// A member connects to whoever leads, follows leader changes and the
// messages, and hands a request to the leader.
func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "leaderrun-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	stop := startLeader(ctx, dir) // another process, in real life
	defer stop()

	c, err := bus.Dial(ctx, dir, "indexer", bus.WaitForLeader())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	reply, err := c.Request(ctx, []byte("notes.txt"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(reply))
	if err := c.Publish(ctx, []byte("hello, everyone")); err != nil {
		log.Fatal(err)
	}
	for ev := range c.Events() {
		switch ev.Kind {
		case bus.EventLeader:
			fmt.Println("leader:", ev.Leader.Mode, "gap:", ev.Gap)
		case bus.EventLost:
			fmt.Println("lost the leader:", ev.Err)
		case bus.EventMessage:
			fmt.Printf("message %d: %s\n", ev.Message.Seq, ev.Message.Data)
			return
		}
	}
	// Output:
	// opening notes.txt
	// leader: exclusive gap: false
	// message 1: hello, everyone
}

// startLeader becomes leader of "indexer" in dir and serves its bus until
// the returned function is called.
func startLeader(ctx context.Context, dir string) (stop func()) {
	locks, err := elect.Open(elect.Config{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	lead, err := locks.Acquire(ctx, "indexer", elect.Request{})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() {
		defer close(served)
		bus.Serve(ctx, lead, bus.WithHandler(func(ctx context.Context, req bus.Request) ([]byte, error) {
			return fmt.Appendf(nil, "opening %s", req.Data), nil
		}))
	}()
	return func() {
		cancel()
		<-served
		lead.Release()
		locks.Close()
	}
}
