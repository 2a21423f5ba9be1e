package etcdcmd_test

import (
	"os"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/etcd/etcdcmd"
)

// leaderrun-etcd's whole main: the leaderrun command line with etcd's
// flags, backend, bus and term ender.
func ExampleOptions() {
	os.Exit(cmd.Main(etcdcmd.Options()...))
}
