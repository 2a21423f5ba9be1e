package pg

import (
	"testing"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/elect/electtest"
)

// TestConformance runs elect's backend-agnostic suite against a real
// PostgreSQL.
func TestConformance(t *testing.T) {
	srv := sharedServer(t)
	electtest.Run(t, func(t *testing.T) elect.Backend {
		return open(t, srv, testSchema(t), Config{})
	})
}
