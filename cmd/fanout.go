package cmd

import (
	"bytes"
	"context"
	"io"
	"os"
	"sync"

	"github.com/leaderrun/leaderrun/bus"
)

// lineTee writes COMMAND's stdout through to w and publishes each complete
// line, without its newline, on the bus. A last line without a newline is
// published when COMMAND ends (flush).
type lineTee struct {
	w   io.Writer
	srv BusServer

	mu      sync.Mutex
	partial []byte
}

func (t *lineTee) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		// Publish never blocks; a slow member is cut off, not waited for.
		_, _ = t.srv.Publish(t.partial[:i])
		t.partial = t.partial[i+1:]
	}
	return n, err
}

func (t *lineTee) flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.partial) > 0 {
		_, _ = t.srv.Publish(t.partial)
		t.partial = nil
	}
}

// followLeader prints, while this instance waits in line, the lines the
// leader publishes, until ctx ends.
func followLeader(ctx context.Context, b busPort, name string) {
	onEvents(ctx, b, name, BusOptions{WaitForLeader: true}, func(ev bus.Event) {
		if ev.Kind == bus.EventMessage {
			os.Stdout.Write(append(ev.Message.Data, '\n'))
		}
	})
}

// onEvents joins name's bus as o says and calls do with each event until
// ctx ends or the bus closes; it returns at once if it cannot join.
func onEvents(ctx context.Context, b busPort, name string, o BusOptions, do func(bus.Event)) {
	cl, err := b.DialBus(ctx, name, o)
	if err != nil {
		return
	}
	defer cl.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-cl.Events():
			if !ok {
				return
			}
			do(ev)
		}
	}
}
