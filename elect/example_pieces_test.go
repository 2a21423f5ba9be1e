package elect_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/leaderrun/leaderrun/elect"
)

// A fenced writer: the resource keeps the highest epoch it accepted, so a
// leader that wakes up after its term (stopped, cut off) cannot write.
func ExampleFence() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	ctx := context.Background()
	fence, err := elect.OpenFence(filepath.Join(dir, "report.fence"))
	if err != nil {
		log.Fatal(err)
	}
	write := func(epoch uint64, what string) {
		err := fence.Do(ctx, epoch, func() error {
			return os.WriteFile(filepath.Join(dir, "report.txt"), []byte(what), 0o600)
		})
		fmt.Printf("epoch %d writes %q: stale %v\n", epoch, what, errors.Is(err, elect.ErrStaleEpoch))
	}
	write(100, "old leader's report")
	fence.Raise(ctx, 200) // the new leader's first act
	write(100, "old leader, woken up late")
	write(200, "new leader's report")
	b, _ := os.ReadFile(filepath.Join(dir, "report.txt"))
	fmt.Println("on disk:", string(b), "| stale refused:", errors.Is(fence.Do(ctx, 150, nil), elect.ErrStaleEpoch))
	// Output:
	// epoch 100 writes "old leader's report": stale false
	// epoch 100 writes "old leader, woken up late": stale true
	// epoch 200 writes "new leader's report": stale false
	// on disk: new leader's report | stale refused: true
}

// Readers share a name; a writer waits until they are done, and readers
// arriving after it wait behind it (FIFO, no writer starvation).
func ExampleLocker_Acquire_shared() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	l, _ := elect.Open(elect.Config{Dir: dir})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	r1, _ := l.Acquire(ctx, "db", elect.Request{Mode: elect.Shared})
	r2, _ := l.Acquire(ctx, "db", elect.Request{Mode: elect.Shared})
	fmt.Println("two readers at once:", r1.Err() == nil && r2.Err() == nil)
	w := make(chan *elect.Leadership)
	go func() {
		lead, _ := l.Acquire(ctx, "db", elect.Request{Mode: elect.Exclusive})
		w <- lead
	}()
	snaps, _ := l.Watch(ctx, "db") // no polling: woken by the queue's changes
	for snap := range snaps {
		if len(snap.Pending) == 1 {
			fmt.Println("writer waits for", len(snap.Held), "readers")
			break
		}
	}
	r1.Release()
	r2.Release()
	writer := <-w
	fmt.Println("writer alone:", writer.Mode(), len(must(l.Query(ctx, "db")).Held))
	writer.Release()
	// Output:
	// two readers at once: true
	// writer waits for 2 readers
	// writer alone: exclusive 1
}

func must(s elect.Snapshot, err error) elect.Snapshot {
	if err != nil {
		log.Fatal(err)
	}
	return s
}

// The visibility-aware leader: it steps aside only to a follower that says
// it is visible, after the user has looked away for a debounce; alone, or
// with only hidden followers, it keeps leading with the same epoch.
func ExampleElector_Yield() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	l, _ := elect.Open(elect.Config{Dir: dir})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	visible := func(p elect.Pending) bool { return slices.Contains(p.Labels, "visible") }

	hidden := make(chan struct{}) // this tab stopped being visible
	leading := make(chan struct{})
	e := &elect.Elector{Backend: l, Name: "poller", Request: elect.Request{Labels: []string{"visible"}}}
	done := make(chan error)
	go func() {
		done <- e.Run(ctx, func(ctx context.Context, lead *elect.Leadership) error {
			close(leading)
			<-hidden
			const debounce = 10 * time.Millisecond
			for {
				select {
				case <-ctx.Done():
					return nil // handed over
				case <-time.After(debounce):
				}
				if ok, _ := e.Yield(ctx, visible); !ok {
					continue // nobody visible waits: keep polling, same epoch
				}
			}
		})
	}()
	<-leading
	close(hidden)
	other, _ := elect.Open(elect.Config{Dir: dir}) // another tab, visible
	defer other.Close()
	lead, _ := other.Acquire(ctx, "poller", elect.Request{Labels: []string{"visible"}})
	fmt.Println("visible follower leads:", lead.Err() == nil, "| old leader:", <-done)
	lead.Release()
	// Output: visible follower leads: true | old leader: <nil>
}
