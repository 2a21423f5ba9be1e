//go:build !linux

package elect

import (
	"os"
	"time"
)

// read adds a wait for f (see waitread_linux.go): here by a read that
// its context ends, as FIFOs may not be in the runtime's poller.
func (w *waitSet) read(f *os.File, toEOF bool) { w.readCtx(f, toEOF) }

func (w *waitSet) readGo(f *os.File, toEOF bool) { w.readCtx(f, toEOF) }

// pollWait is never called here: nothing is added to polls.
func (w *waitSet) pollWait(time.Duration) (bool, error) { return true, nil }

func (w *waitSet) wakeUp()    {}
func (w *waitSet) closeWake() {}

func (w *waitSet) kick()   {}
func (w *waitSet) unkick() {}
