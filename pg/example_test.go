package pg_test

import (
	"context"
	"fmt"
	"log"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/pg"
)

// One instance per host runs this; one of them leads at a time, and each
// term's epoch fences what the leader writes. The connection string is
// libpq's; what it leaves out comes from PGHOST, PGUSER and the rest.
func Example() {
	l, err := pg.Open(pg.Config{URL: "postgres://jobs@db1:5432/ops?sslmode=verify-full"})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	e := &elect.Elector{Backend: l, Name: "backup", Requeue: true}
	err = e.Run(context.Background(), func(ctx context.Context, lead *elect.Leadership) error {
		// Pass lead.Epoch() with every write, and have the store refuse
		// an epoch lower than one it has seen: a paused leader may write
		// after its term ended.
		fmt.Println("leading with epoch", lead.Epoch())
		<-ctx.Done()
		return context.Cause(ctx)
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Query shows who holds a name and who waits, with their hosts.
func ExampleLocker_Query() {
	l, err := pg.Open(pg.Config{URL: "postgres://jobs@db1/ops"})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	s, err := l.Query(context.Background(), "backup")
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range s.Held {
		fmt.Printf("held by pid %d on %s since %v, epoch %d\n", h.PID, h.Host, h.Since, h.Epoch)
	}
	for _, p := range s.Pending {
		fmt.Printf("waiting: pid %d on %s, ticket %d\n", p.PID, p.Host, p.Ticket)
	}
}

// Watch follows a name without polling: a snapshot at once, then one
// after every change.
func ExampleLocker_Watch() {
	l, err := pg.Open(pg.Config{URL: "postgres://jobs@db1/ops"})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	snaps, err := l.Watch(context.Background(), "backup")
	if err != nil {
		log.Fatal(err)
	}
	for s := range snaps {
		fmt.Println(len(s.Held), "holding,", len(s.Pending), "waiting")
	}
}

// Another process (leaderrun's watchdog) readies, as a term begins, the
// end of the term's session, and ends it in one round trip once it knows
// the holder is gone and what it ran has stopped.
func ExampleLocker_PrepareEndSession() {
	l, err := pg.Open(pg.Config{URL: "postgres://jobs@db1/ops"})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	var sid int64 // from the holder's Locker.Session(lead), passed along
	e := l.PrepareEndSession(sid)
	defer e.Close()
	// ... the holder died; its COMMAND is gone ...
	if err := e.End(context.Background()); err != nil {
		log.Fatal(err)
	}
}
