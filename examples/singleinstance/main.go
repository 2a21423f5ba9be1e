// Command singleinstance is a whole single-instance app: the first run
// stays up and handles the arguments of every later run, which prints the
// answer and exits with the code the first run chose. `quit` ends it.
// APP_LOCK_DIR overrides the lock directory (tests); leave it unset.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/leaderrun/leaderrun/instance"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := instance.Run(ctx, "singleinstance-example", instance.Options{Dir: os.Getenv("APP_LOCK_DIR")}, func(ctx context.Context, p *instance.Primary) error {
		for {
			select {
			case inv := <-p.Invocations():
				fmt.Fprintf(inv.Stdout, "pid %d got %q in %s\n", os.Getpid(), inv.Strings(), inv.Cwd)
				inv.Done(len(inv.Args))
				if len(inv.Args) == 1 && string(inv.Args[0]) == "quit" {
					return nil
				}
			case <-ctx.Done():
				return nil
			}
		}
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(res.Exit)
}
