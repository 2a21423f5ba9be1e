package oslock

import (
	"context"
	"errors"
	"io"
	"os"
)

func waitHangup(ctx context.Context, f *os.File) error {
	// Read, not poll: a reader that opened the FIFO after its last writer
	// was gone is never told POLLHUP (the kernel waits for a writer it
	// has seen), but its read returns EOF at once. Nobody writes into a
	// beacon, so whatever arrives is dropped.
	buf := make([]byte, 64)
	for {
		_, err := ReadCtx(ctx, f, buf)
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
