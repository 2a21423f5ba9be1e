//go:build unix

package cmd

import (
	"os"
	"syscall"
)

// startPoller makes the Go runtime create its network poller (on Linux an
// epoll descriptor and an eventfd) now: the runtime throws a fatal error,
// not an error, when it cannot create them later, at the first pollable
// file (the inotify watcher, the bus socket), which a low ulimit -n makes
// happen. It first makes sure that the four descriptors this takes are
// free, so that out of descriptors leaderrun exits 71 with one line.
func startPoller() error {
	var fds []int
	defer func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
	}()
	for range 4 {
		fd, err := syscall.Open(os.DevNull, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			if e := resourceError(err); e != nil {
				return e
			}
			return nil // no /dev/null: let the real work meet the problem
		}
		fds = append(fds, fd)
	}
	for _, fd := range fds {
		syscall.Close(fd)
	}
	fds = nil
	r, w, err := os.Pipe()
	if err != nil {
		return resourceError(err)
	}
	r.Close()
	w.Close()
	return nil
}
