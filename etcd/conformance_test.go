package etcd

import (
	"testing"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/elect/electtest"
)

// TestConformance runs elect's backend-agnostic suite against a real etcd.
func TestConformance(t *testing.T) {
	c := sharedCluster(t)
	electtest.Run(t, func(t *testing.T) elect.Backend {
		return open(t, c, testPrefix(t), Config{})
	})
}
