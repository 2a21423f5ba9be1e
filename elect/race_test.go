//go:build race

package elect

// raceBuild: the race detector slows every process of a run alike (each of
// TestChaos's contenders is this test binary), so bounds on how long a
// contender waited for a CPU are scaled under it (see stallBound).
const raceBuild = true
