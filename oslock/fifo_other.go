//go:build (darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd) && !linux

package oslock

import (
	"context"
	"os"
)

// waitHangup polls here: kqueue does not report the last writer's close of
// a FIFO to its readers on every BSD (golang.org/issue/24164), so the Go
// runtime does not put FIFOs in its poller there. The poll backs off from
// 1ms to 100ms, as the Watcher's does.
func waitHangup(ctx context.Context, f *os.File) error {
	var p Poller
	for !hungUp(f) {
		if err := p.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}
