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

func (h *holding) watch(end func(error)) error {
	w, err := oslock.NewWatcher()
	if err != nil {
		return err
	}
	if err := w.Add(h.q.ResolvedPath(h.tk.e.name), oslock.Gone); err != nil {
		w.Close()
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
// that the successor, woken by the ticket going, finds the lock free.
func (h *holding) release() error {
	h.stop()
	<-h.done
	errs := []error{h.w.Close(), h.lockF.Close()}
	h.tk.drop()
	errs = append(errs, h.q.Close())
	h.l.untrack(h.lead)
	return errors.Join(errs...)
}
