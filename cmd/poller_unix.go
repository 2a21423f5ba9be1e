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
	if err := fourFree(); err != nil {
		return resourceError(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return resourceError(err)
	}
	r.Close()
	w.Close()
	return nil
}

// fourFree makes and closes four descriptors: a pipe and two duplicates,
// which need no path looked up as opening /dev/null four times did. They
// are not close-on-exec, so they are made and closed under ForkLock, lest
// a concurrent fork+exec inherit them.
func fourFree() error {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil {
		return err
	}
	fds := []int{p[0], p[1]}
	defer func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
	}()
	for range 2 {
		fd, err := syscall.Dup(p[0])
		if err != nil {
			return err
		}
		fds = append(fds, fd)
	}
	return nil
}
