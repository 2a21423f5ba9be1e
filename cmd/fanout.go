package cmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

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

// followDrain bounds how long a follower granted the lock reads on for
// the lines its predecessor published before its term ended.
const followDrain = 500 * time.Millisecond

// followLeader prints, while this instance waits in line, the lines the
// leader publishes, until done is closed. If the lock was granted
// (granted closed before done), it first prints what its predecessor
// published before its term ended, so that those lines come before
// COMMAND's own: it reads on until the bus tells that term lost, for
// followDrain at most. logf (-v) is told each leader listened to.
func followLeader(ctx context.Context, b busPort, name string, logf func(string, ...any), done, granted <-chan struct{}) {
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-done:
			stop()
		case <-dctx.Done():
		}
	}()
	cl, err := b.DialBus(dctx, name, BusOptions{WaitForLeader: true})
	if err != nil {
		return
	}
	defer cl.Close()
	f := follower{name: name, logf: logf}
	for {
		select {
		case <-done:
			f.drain(cl.Events(), granted)
			return
		case ev, ok := <-cl.Events():
			if !ok {
				return
			}
			f.print(ev)
		}
	}
}

// follower prints a --fanout waiter's bus events.
type follower struct {
	name    string
	logf    func(string, ...any)
	leading bool // a leader's EventLeader came, and not yet its EventLost
}

func (f *follower) print(ev bus.Event) {
	switch ev.Kind {
	case bus.EventMessage:
		os.Stdout.Write(append(ev.Message.Data, '\n'))
	case bus.EventLeader:
		f.leading = true
		f.logf("%s", listeningTo(f.name, ev.Leader))
	case bus.EventLost:
		f.leading = false
	}
}

// drain prints, once the lock is granted, the events up to the end of the
// term the follower listens to.
func (f *follower) drain(events <-chan bus.Event, granted <-chan struct{}) {
	select {
	case <-granted:
	default:
		return
	}
	t := time.NewTimer(followDrain)
	defer t.Stop()
	for f.leading {
		select {
		case <-t.C:
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			f.print(ev)
		}
	}
}

// listeningTo says, for -v, that this process is a member of name's bus
// led by l: a bus member gets EventLeader once it is in, so every message
// l publishes after this line is printed reaches it.
func listeningTo(name string, l bus.Leader) string {
	s := fmt.Sprintf("listening to %s's bus, led by pid %d", name, l.PID)
	if l.Host != "" {
		s += " on " + l.Host
	}
	return s + fmt.Sprintf(" (epoch %d)", l.Epoch)
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
