//go:build !linux

package elect

import "os"

// read adds a wait for f (see waitread_linux.go): here by a read that
// its context ends, as FIFOs may not be in the runtime's poller.
func (w *waitSet) read(f *os.File, toEOF bool) { w.readCtx(f, toEOF) }

func (w *waitSet) kick()   {}
func (w *waitSet) unkick() {}
