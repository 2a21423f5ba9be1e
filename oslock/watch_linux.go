package oslock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Watcher sleeps until a watched file is closed or loses its name. On Linux
// it is an inotify instance read through the Go runtime's poller: a blocked
// Wait costs no CPU. When the user's inotify instances are exhausted
// (fs.inotify.max_user_instances) it degrades to a bounded poll rather than
// failing; Polling reports that.
type Watcher struct {
	f    *os.File
	wds  []int
	buf  []byte
	poll *poller

	settle time.Duration // back-off after an event; 0: events only
	spent  time.Duration
}

// Closing an inotify instance waits for an RCU grace period in the kernel
// (fsnotify_destroy_group), 8-20ms: too slow for every acquire and
// release. A process therefore keeps up to maxIdle instances, without
// watches, for reuse.
var idle struct {
	sync.Mutex
	files []*os.File
}

const maxIdle = 2

// NewWatcher returns a Watcher with no watches.
func NewWatcher() (*Watcher, error) {
	idle.Lock()
	if n := len(idle.files); n > 0 {
		f := idle.files[n-1]
		idle.files = idle.files[:n-1]
		idle.Unlock()
		w := &Watcher{f: f, buf: make([]byte, 4096)}
		w.drain()
		return w, nil
	}
	idle.Unlock()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err == unix.EMFILE || err == unix.ENFILE || err == unix.ENOSYS {
		return &Watcher{poll: &poller{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("oslock: inotify_init1: %w", err)
	}
	return &Watcher{f: os.NewFile(uintptr(fd), "inotify"), buf: make([]byte, 4096)}, nil
}

// Polling reports whether waits are timed polls rather than kernel events.
func (w *Watcher) Polling() bool { return w.poll != nil }

// Add watches path for ev. A missing file gives fs.ErrNotExist: whatever
// the caller waited for has already happened.
func (w *Watcher) Add(path string, ev Event) error {
	if w.poll != nil {
		return nil
	}
	var mask uint32 = unix.IN_DONT_FOLLOW
	if ev&Closed != 0 {
		mask |= unix.IN_CLOSE_WRITE
	}
	if ev&ClosedAny != 0 {
		mask |= unix.IN_CLOSE_WRITE | unix.IN_CLOSE_NOWRITE
	}
	if ev&Gone != 0 {
		mask |= unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
	}
	var wd int
	err := rawControl(w.f, func(fd int) error {
		var err error
		wd, err = unix.InotifyAddWatch(fd, path, mask)
		return err
	})
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return &fs.PathError{Op: "inotify_add_watch", Path: path, Err: fs.ErrNotExist}
		}
		return &fs.PathError{Op: "inotify_add_watch", Path: path, Err: err}
	}
	w.wds = append(w.wds, wd)
	return nil
}

// Reset removes every watch.
func (w *Watcher) Reset() {
	if w.poll != nil {
		return
	}
	_ = rawControl(w.f, func(fd int) error {
		for _, wd := range w.wds {
			unix.InotifyRmWatch(fd, uint32(wd))
		}
		return nil
	})
	w.wds = w.wds[:0]
}

// Wait blocks until an event arrives on one of the current watches, or
// ctx ends (then it returns ctx's cause). Events of watches removed by
// Reset (IN_IGNORED) do not count.
//
// An event is a hint that a lock is about to be free, not a promise: the
// kernel reports a file's close before it drops the file's flock
// (__fput in fs/file_table.c), so a caller that wakes and still finds the
// lock held must not go back to a sleep that only a later event would end.
// After an event, Wait therefore also returns after a short back-off
// (50µs, doubling up to 100ms), for about one second in all, so the
// caller re-tries a few times; then it sleeps on events alone again.
func (w *Watcher) Wait(ctx context.Context) error {
	if w.poll != nil {
		return w.poll.wait(ctx)
	}
	if err := context.Cause(ctx); err != nil {
		return err
	}
	f := w.f
	if w.settle > 0 {
		f.SetReadDeadline(time.Now().Add(w.settle))
	}
	// Set after the settle deadline, so a cancel always wins. The hook may
	// still be running when Read returns: wait for it, or its deadline
	// could land after the reset below and fail the next Wait.
	hooked := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(hooked)
		f.SetReadDeadline(time.Now())
	})
	defer func() {
		if !stop() {
			<-hooked
		}
		f.SetReadDeadline(time.Time{})
	}()
	for {
		n, err := f.Read(w.buf)
		switch {
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.spent += w.settle
			w.settle = min(2*w.settle, settleMax)
			if w.spent >= settleBudget {
				w.settle, w.spent = 0, 0
			}
			return nil
		case err != nil:
			return fmt.Errorf("oslock: reading inotify: %w", err)
		case w.current(w.buf[:n]):
			w.settle, w.spent = settleStart, 0
			return nil
		}
	}
}

const (
	settleStart  = 50 * time.Microsecond
	settleMax    = 100 * time.Millisecond
	settleBudget = time.Second
)

// current reports whether buf holds an event of a current watch, or a
// queue overflow (which may have hidden one).
func (w *Watcher) current(buf []byte) bool {
	for len(buf) >= unix.SizeofInotifyEvent {
		wd := int(int32(binary.NativeEndian.Uint32(buf[0:])))
		mask := binary.NativeEndian.Uint32(buf[4:])
		size := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[12:]))
		if mask&unix.IN_Q_OVERFLOW != 0 || slices.Contains(w.wds, wd) {
			return true
		}
		if size > len(buf) {
			break
		}
		buf = buf[size:]
	}
	return false
}

// Close releases the watcher. It is idempotent.
//
// The instance itself is kept for reuse by a later NewWatcher, up to
// maxIdle per process, since closing it is slow.
func (w *Watcher) Close() error {
	if w == nil || w.f == nil {
		return nil
	}
	w.Reset()
	f := w.f
	w.f = nil
	idle.Lock()
	if len(idle.files) < maxIdle {
		idle.files = append(idle.files, f)
		idle.Unlock()
		return nil
	}
	idle.Unlock()
	return f.Close()
}

// drain discards the events left over from an earlier user (IN_IGNORED
// of its removed watches) without blocking.
func (w *Watcher) drain() {
	rawControl(w.f, func(fd int) error {
		for {
			if n, err := unix.Read(fd, w.buf); n <= 0 || err != nil {
				return nil
			}
		}
	})
}

func rawControl(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// Settle ends the back-off that follows an event: from now on Wait returns
// only for events. For a watcher handed to a new use, where the last
// event's lock has been dealt with.
func (w *Watcher) Settle() { w.settle, w.spent = 0, 0 }
