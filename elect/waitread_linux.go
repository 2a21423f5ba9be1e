package elect

import (
	"os"
	"time"
)

// On Linux the runtime's poller holds FIFOs, so a read of one ends at its
// read deadline: the wait set reads each beacon and inbox in a goroutine
// of its own, with no context hooked to it, and close ends the reads by
// setting their deadlines (and clears them once they have ended). A
// wake-up then costs no goroutine per file to cancel it, and a sleep no
// context registration per file.

// read adds a goroutine that reads f: with toEOF until the end of file,
// the hang-up (anything written into a beacon is dropped), else until
// anything arrives.
func (w *waitSet) read(f *os.File, toEOF bool) {
	if f.SetReadDeadline(time.Time{}) != nil {
		w.readCtx(f, toEOF) // not in the poller after all
		return
	}
	w.files = append(w.files, f)
	w.n++
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

// kick ends the reads of read's goroutines (after cancel).
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
