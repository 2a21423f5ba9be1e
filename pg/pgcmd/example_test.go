package pgcmd_test

import (
	"os"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/pg/pgcmd"
)

// leaderrun-pg's whole main: the leaderrun command line with
// PostgreSQL's flags, backend, bus and term ender.
func ExampleOptions() {
	os.Exit(cmd.Main(pgcmd.Options()...))
}
