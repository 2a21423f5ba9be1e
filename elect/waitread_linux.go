package elect

import (
	"context"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// On Linux a wait set's beacons and inbox are polled by wait itself: the
// calling goroutine sleeps in ppoll(2) on them, with an eventfd that the
// parent context's end and the other members' goroutines (a process's
// exit) write to. A hang-up then wakes the one thread that goes on with
// the hand-off, with no goroutine started, handed the event, or ended
// for it. A caller that needs a channel (Watch, see events) gets the
// reads in goroutines of their own instead: the runtime's poller holds
// the FIFOs, so a read of one ends at its read deadline, and close ends
// them by setting their deadlines (and clears them once they have ended).
//
// A FIFO opened after its last writer went never reports POLLHUP to that
// reader (the kernel waits for a writer it has seen), but a read returns
// end of file at once: every file is read before each sleep, as the
// goroutines read it, so such a beacon counts as hung up.

// read adds f to the files wait polls: with toEOF until the end of file,
// the hang-up (anything written into a beacon is dropped), else until
// anything arrives.
func (w *waitSet) read(f *os.File, toEOF bool) {
	w.n++
	w.polls = append(w.polls, pollee{f: f, toEOF: toEOF})
}

// readGo adds a goroutine that reads f, as read says.
func (w *waitSet) readGo(f *os.File, toEOF bool) {
	if f.SetReadDeadline(time.Time{}) != nil {
		w.n--               // counted by read, and again by readCtx
		w.readCtx(f, toEOF) // not in the poller after all
		return
	}
	w.files = append(w.files, f)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		var buf [512]byte
		for {
			n, err := f.Read(buf[:])
			if w.ctx.Err() != nil {
				return // kicked by close, or the parent ended
			}
			if toEOF && n > 0 && err == nil {
				continue
			}
			break // the hang-up, a message, or an error: look again
		}
		w.once.Do(func() { close(w.fired) })
	}()
}

// maxPollers bounds the waits of one process that sleep in poll(2), each
// in a thread of its own: beyond it (a process waiting for many names at
// once) a wait sleeps in the runtime's poller, which takes no thread.
const maxPollers = 4

// pollers counts the process's waits in poll(2).
var pollers atomic.Int32

// pollWait is wait for a set with files to poll.
func (w *waitSet) pollWait(d time.Duration) (bool, error) {
	if pollers.Add(1) > maxPollers {
		pollers.Add(-1)
		return w.chanWait(w.events(), d)
	}
	defer pollers.Add(-1)
	fds, ok := w.pollFDs()
	if !ok {
		// A file without a descriptor to poll, or no eventfd: wait
		// on the channel, the files read by goroutines.
		return w.chanWait(w.events(), d)
	}
	stop := context.AfterFunc(w.parent, w.wakeUp)
	defer stop()
	var deadline time.Time
	if d > 0 {
		deadline = time.Now().Add(d)
	}
	first := true
	for {
		for i, p := range w.polls {
			if (first || fds[i].Revents != 0) && readyFD(int(fds[i].Fd), p.toEOF) {
				return true, nil
			}
		}
		first = false
		select {
		case <-w.fired: // a process's exit, say
			return true, nil
		default:
		}
		if w.parent.Err() != nil {
			return false, context.Cause(w.parent)
		}
		var ts *unix.Timespec
		if d > 0 {
			left := time.Until(deadline)
			if left <= 0 {
				return false, nil
			}
			t := unix.NsecToTimespec(int64(left))
			ts = &t
		}
		for i := range fds {
			fds[i].Revents = 0
		}
		if _, err := unix.Ppoll(fds, ts, nil); err != nil && err != unix.EINTR {
			return true, nil // an error from the kernel: look again, which is safe
		}
		if fds[len(fds)-1].Revents != 0 {
			var b [8]byte
			unix.Read(w.wake, b[:])
		}
	}
}

// pollFDs returns the descriptors to poll: the files', then the eventfd.
func (w *waitSet) pollFDs() ([]unix.PollFd, bool) {
	w.mu.Lock()
	if w.wake < 0 {
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			w.mu.Unlock()
			return nil, false
		}
		w.wake = fd
	}
	wake := w.wake
	w.mu.Unlock()
	fds := make([]unix.PollFd, 0, len(w.polls)+1)
	for _, p := range w.polls {
		fd, ok := rawFD(p.f)
		if !ok {
			return nil, false
		}
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	return append(fds, unix.PollFd{Fd: int32(wake), Events: unix.POLLIN}), true
}

// rawFD is f's descriptor, without putting f in blocking mode as f.Fd
// would. The caller keeps f open while it uses it.
func rawFD(f *os.File) (int, bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, false
	}
	fd := -1
	if rc.Control(func(d uintptr) { fd = int(d) }) != nil {
		return -1, false
	}
	return fd, fd >= 0
}

// readyFD reads the FIFO fd without blocking and reports whether its event
// came: for a beacon (toEOF) its hang-up, what is written into it being
// dropped; for an inbox anything (read and dropped: a waiter is only ever
// nudged to look again). An error counts as an event: the caller looks
// again.
func readyFD(fd int, toEOF bool) bool {
	var buf [512]byte
	for {
		n, err := unix.Read(fd, buf[:])
		switch {
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			return false
		case err != nil || n == 0 || !toEOF:
			return true
		}
	}
}

// wakeUp wakes pollWait's sleep.
func (w *waitSet) wakeUp() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.wake >= 0 {
		one := [8]byte{1}
		unix.Write(w.wake, one[:])
	}
}

// closeWake closes the eventfd, once nothing can write to it.
func (w *waitSet) closeWake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.wake >= 0 {
		unix.Close(w.wake)
		w.wake = -1
	}
}

// kick ends the reads of readGo's goroutines (after cancel).
func (w *waitSet) kick() {
	now := time.Now()
	for _, f := range w.files {
		f.SetReadDeadline(now)
	}
}

// unkick clears the deadlines that kick set, once the reads have ended,
// for the next reader of the same file.
func (w *waitSet) unkick() {
	for _, f := range w.files {
		f.SetReadDeadline(time.Time{})
	}
}
