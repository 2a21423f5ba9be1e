package elect

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// inotifyHog holds all but one of the user's inotify instances, as a
// desktop full of editors and file managers does.
type inotifyHog struct{ fds []int }

// exhaustInotify takes the user's inotify instances, leaving one, when
// LEADERRUN_BENCH_EXHAUST_INOTIFY is set; nil otherwise. They are given
// back when b ends.
func exhaustInotify(b *testing.B) *inotifyHog {
	if os.Getenv("LEADERRUN_BENCH_EXHAUST_INOTIFY") == "" {
		return nil
	}
	h := &inotifyHog{}
	for {
		fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
		if err != nil {
			break
		}
		h.fds = append(h.fds, fd)
	}
	if len(h.fds) == 0 {
		b.Fatal("no inotify instance to be had at all")
	}
	unix.Close(h.fds[len(h.fds)-1]) // the one left for others
	h.fds = h.fds[:len(h.fds)-1]
	b.Cleanup(func() {
		for _, fd := range h.fds {
			unix.Close(fd)
		}
	})
	return h
}

// spare reports whether the instance left is still there to be had.
func (h *inotifyHog) spare() bool {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}
