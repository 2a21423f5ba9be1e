package cmd

import (
	"context"
	"testing"

	"github.com/urfave/cli/v3"
)

// BenchmarkParse is the start-up's command line work: New and urfave/cli's
// parse of `leaderrun -n --dir D --name x -- true`, with a no-op action.
func BenchmarkParse(b *testing.B) {
	for b.Loop() {
		a := New()
		a.root.Action = func(context.Context, *cli.Command) error { return nil }
		if err := a.run(context.Background(), []string{"leaderrun", "-n", "--dir", "/nonexistent", "--name", "x", "--", "true"}); err != nil {
			b.Fatal(err)
		}
	}
}
