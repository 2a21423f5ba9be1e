package elect

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/oslock"
)

// waitSet sleeps until the first of several kernel events: a beacon's
// hang-up or a process's exit. Each event is waited for by a goroutine
// parked in the runtime's poller (no thread, no CPU); close ends them all.
type waitSet struct {
	parent context.Context
	ctx    context.Context
	cancel context.CancelFunc
	fired  chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	n      int
	files  []*os.File // read by their goroutines until close kicks them (Linux)
	polls  []pollee   // waited for by wait's poll(2) in the caller's thread (Linux)
	mu     sync.Mutex
	wake   int // an eventfd that wakes wait's poll, or -1 (Linux)
}

// pollee is a FIFO that wait polls: a beacon (toEOF: its hang-up) or an
// inbox (anything that arrives).
type pollee struct {
	f     *os.File
	toEOF bool
}

func newWaitSet(parent context.Context) *waitSet {
	ctx, cancel := context.WithCancel(parent)
	return &waitSet{parent: parent, ctx: ctx, cancel: cancel, fired: make(chan struct{}), wake: -1}
}

// hangup adds the hang-up of the beacon f, opened read-only.
func (w *waitSet) hangup(f *os.File) { w.read(f, true) }

// message adds the arrival of anything in the inbox f, our own FIFO (read
// and dropped: a waiter is only ever nudged to look again).
func (w *waitSet) message(f *os.File) { w.read(f, false) }

// readCtx is read (see waitread_*.go) where FIFOs cannot be kicked out of
// a read by a deadline: each read ends with the context.
func (w *waitSet) readCtx(f *os.File, toEOF bool) {
	if toEOF {
		w.add(func(ctx context.Context) error { return oslock.WaitHangup(ctx, f) })
		return
	}
	w.add(func(ctx context.Context) error {
		var buf [512]byte
		_, err := oslock.ReadCtx(ctx, f, buf[:])
		return err
	})
}

// gone adds the exit of process pid.
func (w *waitSet) gone(pid int) {
	w.add(func(ctx context.Context) error { return oslock.WaitGone(ctx, pid) })
}

func (w *waitSet) add(fn func(context.Context) error) {
	w.n++
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		fn(w.ctx)
		if w.ctx.Err() == nil {
			// An event, or an error from the kernel: either way the
			// caller looks again, which is always safe.
			w.once.Do(func() { close(w.fired) })
			w.wakeUp()
		}
	}()
}

func (w *waitSet) empty() bool { return w.n == 0 }

// events returns the channel that is closed at the first event, for a
// caller that selects on it beside other channels (Watch): from then on
// every file is waited for by a goroutine of its own.
func (w *waitSet) events() <-chan struct{} {
	for _, p := range w.polls {
		w.readGo(p.f, p.toEOF)
	}
	w.polls = nil
	return w.fired
}

// wait blocks until an event, the parent context's end (its cause is
// returned), or d (when d > 0) has passed; fired tells an event from the
// timer. Where the files can be polled (Linux) the calling goroutine
// sleeps in poll(2) itself: an event wakes this one thread, which goes on
// at once, with no goroutine to hand the event over.
func (w *waitSet) wait(d time.Duration) (fired bool, err error) {
	if len(w.polls) > 0 {
		return w.pollWait(d)
	}
	return w.chanWait(w.fired, d)
}

// chanWait is wait on the channel fired.
func (w *waitSet) chanWait(fired <-chan struct{}, d time.Duration) (bool, error) {
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-w.parent.Done():
		return false, context.Cause(w.parent)
	case <-fired:
		return true, nil
	case <-timeout:
		return false, nil
	}
}

// close ends the goroutines and waits for them.
func (w *waitSet) close() {
	w.cancel()
	w.kick()
	w.wg.Wait()
	w.unkick()
	w.closeWake()
}
