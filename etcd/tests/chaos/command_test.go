package chaos

import (
	"testing"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/etcd/etcdcmd"
	drv "github.com/leaderrun/leaderrun/internal/chaos"
)

// The test binary plays leaderrun-etcd, when started through the link of
// that name that drv.Main makes, and the term's watchdog, which
// supervise starts from /proc/self/exe; under it, it plays drv's
// COMMAND.
func TestMain(m *testing.M) {
	drv.Main(m, "leaderrun-etcd", func() int { return cmd.Main(etcdcmd.Options()...) })
}
