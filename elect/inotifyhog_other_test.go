//go:build !linux

package elect

import (
	"os"
	"testing"
)

// inotifyHog is Linux's (inotifyhog_linux_test.go): elsewhere nothing
// takes inotify instances.
type inotifyHog struct{}

func exhaustInotify(b *testing.B) *inotifyHog {
	if os.Getenv("LEADERRUN_BENCH_EXHAUST_INOTIFY") != "" {
		b.Skip("inotify is Linux's")
	}
	return nil
}

func (h *inotifyHog) spare() bool { return true }
