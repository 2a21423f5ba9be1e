package elect_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/leaderrun/leaderrun/elect"
)

func exampleDir() string {
	dir, err := os.MkdirTemp("", "elect-example-")
	if err != nil {
		log.Fatal(err)
	}
	return dir
}

// Acquire waits in line for a name and returns the leadership; the epoch
// fences what the leader writes.
func ExampleLocker_Acquire() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	l, err := elect.Open(elect.Config{Dir: dir}) // Dir "" = private default
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lead, err := l.Acquire(ctx, "nightly-backup", elect.Request{})
	if err != nil {
		log.Fatal(err)
	}
	defer lead.Release()
	fmt.Println("leading", lead.Name(), "as", lead.Mode(), "epoch > 0:", lead.Epoch() > 0)
	// Output: leading nightly-backup as exclusive epoch > 0: true
}

// TryAcquire is navigator.locks.request's ifAvailable: answer at once.
func ExampleLocker_TryAcquire() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	a, _ := elect.Open(elect.Config{Dir: dir})
	defer a.Close()
	b, _ := elect.Open(elect.Config{Dir: dir})
	defer b.Close()

	ctx := context.Background()
	lead, ok, err := a.TryAcquire(ctx, "poller", elect.Exclusive)
	fmt.Println("a:", ok, err)
	_, ok, err = b.TryAcquire(ctx, "poller", elect.Exclusive)
	fmt.Println("b:", ok, err)
	lead.Release()
	// Output:
	// a: true <nil>
	// b: false <nil>
}

// An Elector runs leader work while this process leads; the work's context
// ends when leadership does.
func ExampleElector() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	l, _ := elect.Open(elect.Config{Dir: dir})
	defer l.Close()

	e := &elect.Elector{
		Backend: l,
		Name:    "sync-daemon",
		OnRole:  func(r elect.Role, _ *elect.Leadership) { fmt.Println("role:", r) },
	}
	err := e.Run(context.Background(), func(ctx context.Context, lead *elect.Leadership) error {
		fmt.Println("doing the leader's work")
		return nil // done: Run releases and returns (no Requeue)
	})
	fmt.Println("err:", err)
	// Output:
	// role: follower
	// role: leader
	// doing the leader's work
	// role: stopped
	// err: <nil>
}

// Query is navigator.locks.query(): who holds, who waits, in order.
func ExampleLocker_Query() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	l, _ := elect.Open(elect.Config{Dir: dir})
	defer l.Close()
	ctx := context.Background()
	lead, _ := l.Acquire(ctx, "report", elect.Request{Mode: elect.Shared})
	defer lead.Release()

	snap, _ := l.Query(ctx, "report")
	for _, h := range snap.Held {
		fmt.Println(h.Name, h.Mode, h.PID == os.Getpid(), h.State)
	}
	fmt.Println("pending:", len(snap.Pending))
	// Output:
	// report shared true running
	// pending: 0
}
