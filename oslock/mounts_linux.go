package oslock

import (
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// mounts is the process's one watch of /proc/self/mountinfo, which the
// kernel marks (EPOLLERR|EPOLLPRI) when the mount table changes. The Go
// runtime's poller waits on it directly, so the watch costs no thread;
// since the poller's own epoll_wait consumes the mark, every wake-up of
// the poller for it counts as a change (a spurious one only makes holders
// look at their lock file once more).
var mounts struct {
	sync.Mutex
	err  error
	subs map[chan struct{}]struct{}
}

func watchMounts() (<-chan struct{}, func(), error) {
	mounts.Lock()
	defer mounts.Unlock()
	if mounts.err != nil {
		return nil, nil, mounts.err
	}
	if mounts.subs == nil {
		if err := startMounts(); err != nil {
			mounts.err = err
			return nil, nil, err
		}
		mounts.subs = map[chan struct{}]struct{}{}
	}
	c := make(chan struct{}, 1)
	mounts.subs[c] = struct{}{}
	return c, func() {
		mounts.Lock()
		delete(mounts.subs, c)
		mounts.Unlock()
	}, nil
}

func startMounts() error {
	fd, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("oslock: watching mounts: %w", err)
	}
	f := os.NewFile(uintptr(fd), "mountinfo") // non-blocking: the poller's
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return err
	}
	go readMounts(f, rc)
	return nil
}

// readMounts tells the subscribers of each change until f fails. It is
// the one goroutine of the watch (a goleak test ignores it by this name,
// as it does readSentinel, the inotify instance's).
func readMounts(f *os.File, rc syscall.RawConn) {
	defer f.Close()
	for {
		woken := false
		err := rc.Read(func(uintptr) bool {
			if !woken {
				woken = true
				return false // wait for the poller
			}
			return true
		})
		if err != nil {
			return
		}
		mounts.Lock()
		for c := range mounts.subs {
			select {
			case c <- struct{}{}:
			default:
			}
		}
		mounts.Unlock()
	}
}
