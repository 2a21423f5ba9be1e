package bus_test

import (
	"context"
	"fmt"
	"log"

	lrbus "github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/etcd"
	etcdbus "github.com/leaderrun/leaderrun/etcd/bus"
)

// The leader of "config" announces each new version to every host and
// answers questions; it serves the bus for as long as its term lasts.
func ExampleListen() {
	l, err := etcd.Open(etcd.Config{Endpoints: []string{"http://127.0.0.1:2379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	e := &elect.Elector{Backend: l, Name: "config", Requeue: true}
	err = e.Run(context.Background(), func(ctx context.Context, lead *elect.Leadership) error {
		srv, err := etcdbus.Listen(l, lead, etcdbus.WithHandler(func(ctx context.Context, r lrbus.Request) ([]byte, error) {
			return []byte("version 42"), nil
		}))
		if err != nil {
			return err
		}
		go srv.Serve(ctx)
		defer srv.Close()
		// Queued at once; etcd gives it its seq when it commits it.
		if _, err := srv.Publish([]byte("version 42 is out")); err != nil {
			log.Print(err)
		}
		<-ctx.Done()
		return context.Cause(ctx)
	})
	if err != nil {
		log.Fatal(err)
	}
}

// A member on any host follows the leaders of "config" and asks one a
// question.
func ExampleDial() {
	l, err := etcd.Open(etcd.Config{Endpoints: []string{"http://127.0.0.1:2379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	cl, err := etcdbus.Dial(ctx, l, "config", etcdbus.DialOptions{WaitForLeader: true})
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	if v, err := cl.Request(ctx, []byte("which version?")); err == nil {
		fmt.Printf("%s\n", v)
	}
	for ev := range cl.Events() {
		switch ev.Kind {
		case lrbus.EventLeader:
			fmt.Printf("leader pid %d on %s, epoch %d (gap %v)\n", ev.Leader.PID, ev.Leader.Host, ev.Leader.Epoch, ev.Gap)
		case lrbus.EventLost:
			fmt.Println("leader lost:", ev.Err)
		case lrbus.EventMessage:
			fmt.Printf("%d/%d: %s (gap %v)\n", ev.Message.Epoch, ev.Message.Seq, ev.Message.Data, ev.Gap)
		}
	}
}
