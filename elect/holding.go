package elect

import (
	"context"
	"errors"
	"os"

	"github.com/leaderrun/leaderrun/oslock"
)

// holding is what a granted request keeps: its ticket, the kernel lock, and
// a goroutine that watches the ticket's name, whose removal means a steal.
type holding struct {
	l     *Locker
	lead  *Leadership
	q     *oslock.Dir
	tk    *ticket
	lockF *os.File

	w    *oslock.Watcher
	stop context.CancelFunc
	done chan struct{}
}

// watch starts the steal watch on w, the watcher the request waited with.
func (h *holding) watch(w *oslock.Watcher, end func(error)) error {
	w.Reset()
	w.Settle() // the wake-up that led here is spent
	if err := w.Add(h.q.ResolvedPath(h.tk.e.name), oslock.Gone); err != nil {
		return err
	}
	h.w = w
	ctx, stop := context.WithCancel(context.Background())
	h.stop, h.done = stop, make(chan struct{})
	go func() {
		defer close(h.done)
		for h.tk.present() {
			if err := w.Wait(ctx); err != nil {
				return
			}
		}
		if ctx.Err() == nil {
			end(ErrStolen)
		}
	}()
	return nil
}

// release gives the lock up: the kernel lock first, then the ticket, so
// that the successor, woken by the ticket going, finds the lock free. The
// watch goroutine is stopped first (so our own unlink is not taken for a
// steal) but waited for only after the successor has been let in.
func (h *holding) release() error {
	h.stop()
	errs := []error{h.lockF.Close()}
	h.tk.drop()
	<-h.done
	errs = append(errs, h.w.Close(), h.q.Close())
	h.l.untrack(h.lead)
	return errors.Join(errs...)
}
