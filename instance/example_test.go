package instance_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/instance"
)

// A single-instance app: the first launch is the primary and handles every
// launch's arguments; a later launch prints the primary's answer and exits
// with its code. Here both launches are in one process, to be runnable as
// an example; in an app, each is a run of the program, calling app().
func ExampleRun() {
	dir, _ := os.MkdirTemp("", "instance-example-")
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o700)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	started := make(chan struct{})
	app := func(args ...string) (instance.Result, error) {
		o := instance.Options{Dir: dir} // Dir "" = the private default; Args default os.Args[1:]
		for _, a := range args {
			o.Args = append(o.Args, []byte(a))
		}
		return instance.Run(ctx, "editor", o, func(ctx context.Context, p *instance.Primary) error {
			for {
				select {
				case inv := <-p.Invocations():
					if inv.Local {
						fmt.Println("primary started with", inv.Strings())
						close(started)
						continue
					}
					fmt.Fprintf(inv.Stdout, "opened %s in the running editor\n", strings.Join(inv.Strings(), ", "))
					inv.Done(0)
				case <-ctx.Done():
					return nil
				}
			}
		})
	}

	primary := make(chan struct{})
	go func() {
		defer close(primary)
		app("notes.txt")
	}()
	<-started                       // the first launch is up
	res, err := app("todo.txt", "") // prints the primary's answer
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("second launch exits", res.Exit, "primary:", res.Primary)
	cancel()
	<-primary
	// Output:
	// primary started with [notes.txt]
	// opened todo.txt,  in the running editor
	// second launch exits 0 primary: false
}
