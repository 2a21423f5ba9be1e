// Command leaderrun runs a command on only one of several instances on one
// machine, elected over flock(2); see `leaderrun --help`.
package main

//go:generate go run ./internal/man/mangen -o docs/leaderrun.1 -readme docs/command.md

import (
	"os"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/internal/handovers"
)

func main() { os.Exit(cmd.Main(handovers.Options()...)) }
