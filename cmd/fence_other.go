//go:build !linux

package cmd

// fenceOrphans needs /proc/PID/environ; elsewhere a COMMAND whose leaderrun
// was killed with SIGKILL is not stopped by the next leader. See doc.go.
func fenceOrphans(dir, name string, exclusive bool) {}
