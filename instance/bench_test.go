package instance

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
)

// BenchmarkRoundTrip compares, in one run, a forward's round trip (submit,
// accepted, wait, done: two bus requests over an established connection,
// to a primary that answers at once) with a plain request and reply over a
// Unix socket (write a line, read a line), and the whole of a later
// launch's Run (queue for the lock, dial, forward, close) with a plain
// connect, request, reply and close: launch-run ÷ launch-unix-socket is
// the single-instance forward's ratio (issue 24: at most 4×).
//
//	go test -run '^$' -bench RoundTrip -count 5 ./instance
func BenchmarkRoundTrip(b *testing.B) {
	dir := b.TempDir()
	os.Chmod(dir, 0o700)
	ctx := b.Context()
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	up := make(chan struct{})
	go Run(pctx, "bench", Options{Dir: dir, Args: [][]byte{}}, func(ctx context.Context, p *Primary) error {
		for {
			select {
			case inv := <-p.Invocations():
				if inv.Local {
					close(up)
					continue
				}
				inv.Stdout.Write([]byte("ok\n"))
				inv.Done(0)
			case <-ctx.Done():
				return nil
			}
		}
	})
	<-up

	// The plain peer: a Unix socket server that answers each line.
	sock := filepath.Join(b.TempDir(), "plain.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadBytes('\n')
					if err != nil {
						return
					}
					c.Write(line)
				}
			}()
		}
	}()

	b.Run("forward", func(b *testing.B) {
		c, err := bus.Dial(ctx, dir, "bench", bus.PublishOnly())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		for i := 0; b.Loop(); i++ {
			id := NewID()
			sub := wireRequest{Op: opSubmit, ID: id, Args: [][]byte{[]byte("x")}, Cwd: []byte("/")}.encode()
			out, err := c.Request(ctx, sub)
			if err != nil {
				b.Fatal(err)
			}
			w := wireRequest{Op: opWait, ID: id}.encode()
			for {
				rep, _ := decodeReply(out)
				if rep.Done {
					break
				}
				if out, err = c.Request(ctx, w); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("bus-request", func(b *testing.B) {
		// The floor: one bus request to a handler that answers at once.
		edir := b.TempDir()
		os.Chmod(edir, 0o700)
		lk, err := elect.Open(elect.Config{Dir: edir})
		if err != nil {
			b.Fatal(err)
		}
		defer lk.Close()
		lead, err := lk.Acquire(ctx, "echo", elect.Request{})
		if err != nil {
			b.Fatal(err)
		}
		defer lead.Release()
		srv, err := bus.Listen(lead, bus.WithHandler(func(_ context.Context, r bus.Request) ([]byte, error) { return r.Data, nil }))
		if err != nil {
			b.Fatal(err)
		}
		sctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); srv.Serve(sctx) }()
		defer func() { stop(); <-done }()
		c, err := bus.Dial(ctx, edir, "echo", bus.PublishOnly())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		msg := wireRequest{Op: opSubmit, ID: NewID(), Args: [][]byte{[]byte("x")}, Cwd: []byte("/")}.encode()
		for b.Loop() {
			if _, err := c.Request(ctx, msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unix-socket", func(b *testing.B) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		r := bufio.NewReader(c)
		for b.Loop() {
			c.Write([]byte("submit 0123456789abcdef0123456789abcdef x /\n"))
			if _, err := r.ReadBytes('\n'); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("launch-run", func(b *testing.B) {
		for b.Loop() {
			_, err := Run(ctx, "bench", Options{Dir: dir, Args: [][]byte{[]byte("x")}, Stdout: discard{}, Stderr: discard{}},
				func(context.Context, *Primary) error { b.Fatal("became the primary"); return nil })
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("launch-unix-socket", func(b *testing.B) {
		for b.Loop() {
			c, err := net.Dial("unix", sock)
			if err != nil {
				b.Fatal(err)
			}
			c.Write([]byte("x\n"))
			bufio.NewReader(c).ReadBytes('\n')
			c.Close()
		}
	})
	b.Run("launch-trylock", func(b *testing.B) {
		// What `leaderrun -n` does before failing: open, try, fail.
		for b.Loop() {
			lk, err := elect.Open(elect.Config{Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			if _, ok, err := lk.TryAcquire(ctx, "bench", elect.Exclusive); ok || err != nil {
				b.Fatal(ok, err)
			}
			lk.Close()
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
