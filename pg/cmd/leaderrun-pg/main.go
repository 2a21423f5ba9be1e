// Command leaderrun-pg is leaderrun over PostgreSQL: the same flags,
// subcommands, exit codes and output, with contenders on many hosts. The
// plain leaderrun hands a command line with --pg-url over to it. See
// `leaderrun-pg --help` and pg/README.md.
package main

import (
	"os"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/pg/pgcmd"
)

func main() { os.Exit(cmd.Main(pgcmd.Options()...)) }
