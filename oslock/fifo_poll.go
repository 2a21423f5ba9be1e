//go:build unix && !linux

package oslock

import (
	"context"
	"os"

	"golang.org/x/sys/unix"
)

// waitHangup polls here: kqueue does not report the last writer's close of
// a FIFO to its readers on every BSD (golang.org/issue/24164), so the Go
// runtime does not put FIFOs in its poller there. The poll backs off from
// 1ms to 100ms, as the Watcher's does.
func waitHangup(ctx context.Context, f *os.File) error {
	var p poller
	for {
		rc, err := f.SyscallConn()
		if err != nil {
			return err
		}
		hup := false
		rc.Control(func(fd uintptr) {
			var buf [64]byte
			for {
				n, err := unix.Read(int(fd), buf[:])
				if err == unix.EINTR || n > 0 {
					continue
				}
				hup = n == 0 && err == nil
				return
			}
		})
		if hup {
			return nil
		}
		if err := p.wait(ctx); err != nil {
			return err
		}
	}
}
