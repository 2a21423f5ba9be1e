// Command leaderrun runs a command on only one of several instances on one
// machine, elected over flock(2); see `leaderrun --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/leaderrun/leaderrun/cmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cmd.New().RunContext(ctx, os.Args)
	stop()
	os.Exit(cmd.ExitCode(err))
}
