//go:build linux

package chaos

import (
	"testing"

	"github.com/leaderrun/leaderrun/cmd"
	drv "github.com/leaderrun/leaderrun/internal/chaos"
	"github.com/leaderrun/leaderrun/pg/pgcmd"
)

// The test binary plays leaderrun-pg, when started through the link of
// that name that drv.Main makes, and the term's watchdog, which
// supervise starts from /proc/self/exe; under it, it plays drv's
// COMMAND.
func TestMain(m *testing.M) {
	drv.Main(m, "leaderrun-pg", func() int { return cmd.Main(pgcmd.Options()...) })
}
