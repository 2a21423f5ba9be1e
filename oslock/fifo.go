package oslock

import (
	"context"
	"os"
	"time"
)

// A beacon is a FIFO that its owner holds open for reading and writing for
// as long as it lives. Anyone may open it read-only and sleep until it
// hangs up, which happens when the owner closes it or dies: the kernel
// closes a dead process's descriptors. That is a close event that needs no
// inotify instance and that the Go runtime's poller waits for, so a waiter
// costs one descriptor and no CPU, and a context cancels it at once.
//
// The hang-up is reported only after the kernel has finished with the
// owner's descriptor of the FIFO, including the owner's flock on it. Locks
// the owner holds on other files may be released a moment later when it
// dies, so a waiter that wakes and still finds such a lock taken must look
// again (see [WaitGone]).
//
// A waiter reads the beacon to learn of the hang-up (a reader that opens
// it after its owner is gone is told at once), so nothing must be written
// into a beacon; a channel to the owner is a second FIFO that only the
// owner reads, written with [Dir.SignalBeacon] in short messages of at
// most PIPE_BUF bytes, which arrive whole.

// OpenBeacon opens the FIFO name inside d without following links: for its
// owner read-write (it then never sees a hang-up of its own), for a waiter
// read-only. Both are non-blocking and registered with the runtime poller.
// Anything but a FIFO under that name is refused.
func (d *Dir) OpenBeacon(name string, owner bool) (*os.File, error) { return d.openBeacon(name, owner) }

// MakeBeacon creates the FIFO name inside d, mode perm (plus group access
// in a group-shared directory). It fails with fs.ErrExist if name exists.
func (d *Dir) MakeBeacon(name string, perm os.FileMode) error { return d.makeBeacon(name, perm) }

// SignalBeacon writes msg (at most 512 bytes) into the FIFO name for its
// owner to read. It reports fs.ErrNotExist when the beacon is missing or
// its owner is gone.
func (d *Dir) SignalBeacon(name string, msg []byte) error { return d.signalBeacon(name, msg) }

// WaitHangup blocks until every writer of the FIFO f (opened read-only by
// [Dir.OpenBeacon]) has closed it, or ctx ends (it then returns ctx's
// cause). It reads f, discarding anything written into it.
func WaitHangup(ctx context.Context, f *os.File) error { return waitHangup(ctx, f) }

// HungUp reports, without blocking, whether every writer of the FIFO f
// (opened read-only by [Dir.OpenBeacon]) has closed it.
func HungUp(f *os.File) bool { return hungUp(f) }

// A Watch tells when a file may have lost its name: unlinked, renamed, or
// its directory moved. C receives a value (coalesced) at each such event;
// the receiver checks what happened. On Linux every Watch of a process
// shares one inotify instance, made on first use; elsewhere WatchPath
// reports [ErrUnsupported].
type Watch struct {
	wd    int32
	mask  uint32
	child string
	C     chan struct{}
}

// WatchPath starts a Watch of path (not following a final link).
func WatchPath(path string) (*Watch, error) { return watchPath(path) }

// WatchChild starts a Watch that fires when an entry called name is
// created in, or moved into, the directory dir (and when dir goes away).
// It shares the process's one inotify instance too: a process waiting for
// any number of sockets to appear costs the user one instance.
func WatchChild(dir, name string) (*Watch, error) { return watchChild(dir, name) }

// Stop ends the watch. C is not closed.
func (w *Watch) Stop() {
	if w != nil {
		w.stop()
	}
}

func (w *Watch) poke() {
	select {
	case w.C <- struct{}{}:
	default:
	}
}

// AboveWatches moves the descriptors of files, in order, above the
// process's inotify instance and above each other, and returns the files
// to use from then on (a moved one is closed and replaced). The kernel
// tears down a dying process's descriptors from the highest number down,
// and an inotify instance's teardown waits for an RCU grace period
// (about 10ms): what sits above it is released first, and in the reverse
// of the given order. A holder lists its beacon, its ticket and its lock,
// so that when it dies its lock is dropped first and its beacon, which
// wakes the successor, last of the three, all before that wait.
func AboveWatches(files ...*os.File) ([]*os.File, error) {
	min := sentinelFD()
	out := make([]*os.File, len(files))
	for i, f := range files {
		g, err := above(f, min)
		if err != nil {
			copy(out[i:], files[i:])
			return out, err
		}
		out[i], min = g, int(g.Fd())
	}
	return out, nil
}

// WatchMounts returns a channel that receives a value (coalesced) each
// time the process's mount table changes: something mounted (over a lock
// directory, say) or unmounted, including lazily. A mount over a path
// sends no inotify event, so a holder watches this too. It costs the
// process one goroutine and two descriptors, made on first use and shared
// by every caller; stop ends this caller's interest. Off Linux it reports
// ErrUnsupported.
func WatchMounts() (c <-chan struct{}, stop func(), err error) { return watchMounts() }

// ReadCtx reads f (non-blocking, in the runtime's poller) once: it returns
// when something arrives, at end of file, or when ctx ends, with ctx's
// cause then. It leaves no read deadline on f, so that the next reader of
// f (a beacon's next waiter, an inbox's holder) is not cut short.
func ReadCtx(ctx context.Context, f *os.File, buf []byte) (int, error) {
	if err := context.Cause(ctx); err != nil {
		return 0, err
	}
	f.SetReadDeadline(time.Time{})
	hooked := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(hooked)
		f.SetReadDeadline(time.Now())
	})
	n, err := f.Read(buf)
	if !stop() {
		<-hooked
		f.SetReadDeadline(time.Time{})
	}
	if ctx.Err() != nil {
		return n, context.Cause(ctx)
	}
	return n, err
}
