package pg

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/leaderrun/leaderrun/elect"
)

// runContender is the test binary re-executed as a contender on another
// "host": it opens a Locker on LR_URL and LR_SCHEMA, prints "queued" once
// its request is made, then "leader EPOCH" when granted and "lost
// UNIXNANO CAUSE" when the term ends, with the time by its clock. Stdin closing ends it.
func runContender() int {
	ttl, _ := time.ParseDuration(os.Getenv("LR_TTL"))
	l, err := Open(Config{URL: os.Getenv("LR_URL"), Schema: os.Getenv("LR_SCHEMA"), TTL: ttl, Host: "role"})
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	go func() { io.Copy(io.Discard, os.Stdin); os.Exit(0) }()
	name := os.Getenv("LR_NAME")
	go func() {
		for {
			s, err := l.Query(context.Background(), name)
			if err == nil && (len(s.Pending) > 0 || len(s.Held) > 0) {
				for _, p := range s.Pending {
					if p.PID == os.Getpid() {
						fmt.Println("queued")
						return
					}
				}
				for _, h := range s.Held {
					if h.PID == os.Getpid() {
						return
					}
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	lead, err := l.Acquire(context.Background(), name, elect.Request{})
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	fmt.Println("leader", lead.Epoch())
	<-lead.Done()
	fmt.Println("lost", time.Now().UnixNano(), lead.Err())
	lead.Release()
	select {}
}
