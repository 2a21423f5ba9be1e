package cmd

import (
	"context"
	"testing"

	cli "github.com/leaderrun/leaderrun/internal/urfavecli"
)

// BenchmarkParse is the start-up's command line work: New and urfave/cli's
// parse of `leaderrun -n --dir D --name x -- true`, with a no-op action.
func BenchmarkParse(b *testing.B) {
	for b.Loop() {
		a := New()
		a.App.Action = func(*cli.Context) error { return nil }
		if err := a.App.RunContext(context.Background(), []string{"leaderrun", "-n", "--dir", "/nonexistent", "--name", "x", "--", "--", "true"}); err != nil {
			b.Fatal(err)
		}
	}
}
