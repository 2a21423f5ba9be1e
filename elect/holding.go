package elect

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"sync"

	"github.com/leaderrun/leaderrun/oslock"
)

// holding is what a granted request keeps: its ticket and beacon, the
// kernel lock, and a goroutine that reads the inbox, where a stealer's
// notice arrives.
type holding struct {
	l     *Locker
	lead  *Leadership
	dir   *oslock.Dir
	name  string
	q     *oslock.Dir
	tk    *ticket
	lockF *os.File

	mu   sync.Mutex // guards tk.rec against the reader
	done chan struct{}
}

// watch starts the goroutine that reads the inbox until it is closed.
func (h *holding) watch(end func(error)) {
	h.done = make(chan struct{})
	go func() {
		defer close(h.done)
		buf := make([]byte, 512)
		var pending []byte
		for {
			n, err := h.tk.inbox.Read(buf)
			if err != nil {
				return
			}
			pending = append(pending, buf[:n]...)
			for {
				line, rest, ok := bytes.Cut(pending, []byte{'\n'})
				if !ok {
					break
				}
				pending = rest
				if h.deposedBy(line) {
					end(ErrStolen)
				}
			}
			if len(pending) > 512 {
				pending = nil // not ours: nothing leaderrun writes is this long
			}
		}
	}()
}

// deposedBy reports whether line is a steal notice for this term, and
// marks the ticket so that Query shows the holder as deposed.
func (h *holding) deposedBy(line []byte) bool {
	s, ok := bytes.CutPrefix(line, []byte("S"))
	if !ok {
		return false
	}
	epoch, err := strconv.ParseUint(string(s), 10, 64)
	if err != nil || epoch != h.lead.Epoch() {
		return false // a notice for an earlier grant that stepped back
	}
	h.mu.Lock()
	if !h.tk.rec.Deposed {
		h.tk.rec.Deposed = true
		h.tk.write()
	}
	h.mu.Unlock()
	return true
}

// release gives the lock up: the kernel lock first, then the ticket, and
// the beacon last, so that the successor, woken by the beacon's hang-up,
// finds the lock free.
func (h *holding) release() error {
	errs := []error{h.lockF.Close()}
	h.mu.Lock()
	h.tk.unpublish()
	h.mu.Unlock()
	h.tk.inbox.Close() // ends the reader
	<-h.done
	h.tk.beacon.Close()
	errs = append(errs, h.q.Close())
	h.l.untrack(h.lead)
	return errors.Join(errs...)
}
