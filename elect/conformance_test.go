package elect_test

import (
	"testing"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/elect/electtest"
)

// TestConformance runs the backend-agnostic suite on the flock backend.
func TestConformance(t *testing.T) {
	electtest.Run(t, func(t *testing.T) elect.Backend {
		l, err := elect.Open(elect.Config{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	})
}
