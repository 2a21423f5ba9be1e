package clichaos

import (
	"testing"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/internal/chaos"
)

// The test binary plays leaderrun itself, when started through the link
// named leaderrun that chaos.Main makes (cmd.Main, as main.go runs it),
// and, under it, chaos's COMMAND and the grandchild that COMMAND leaves
// behind.
func TestMain(m *testing.M) {
	chaos.Main(m, "leaderrun", func() int { return cmd.Main() })
}
