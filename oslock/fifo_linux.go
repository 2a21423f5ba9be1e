package oslock

import (
	"context"
	"errors"
	"io"
	"os"
	"time"
)

func waitHangup(ctx context.Context, f *os.File) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	// A file kept for several waits may carry the deadline that ended
	// the last one.
	f.SetReadDeadline(time.Time{})
	hooked := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(hooked)
		f.SetReadDeadline(time.Now())
	})
	defer func() {
		if !stop() {
			<-hooked
		}
	}()
	// Read, not poll: a reader that opened the FIFO after its last writer
	// was gone is never told POLLHUP (the kernel waits for a writer it
	// has seen), but its read returns EOF at once. Nobody writes into a
	// beacon, so whatever arrives is dropped.
	buf := make([]byte, 64)
	for {
		_, err := f.Read(buf)
		switch {
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
	}
}
