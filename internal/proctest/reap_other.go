//go:build unix && !linux

package proctest

// ReapOrphans does nothing here: only Linux makes the test binary a child
// subreaper, to which orphans are handed.
func ReapOrphans() {}
