// Command leaderrun-etcd is leaderrun over an etcd cluster: the same flags,
// subcommands, exit codes and output, with contenders on many hosts. The
// plain leaderrun hands a command line with --etcd-endpoints over to it.
// See `leaderrun-etcd --help` and docs/etcd.md.
package main

import (
	"os"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/etcd/etcdcmd"
)

func main() { os.Exit(cmd.Main(etcdcmd.Options()...)) }
