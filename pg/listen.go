package pg

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// listener is the Locker's LISTEN connection. Every request row names the
// Locker's channel and a key of its own; whoever changes a name notifies
// only the requests that may move (wake_after), with the payload
// "KEY KIND": wake, stolen or gone. The connection takes no part in
// safety: when it fails, every subscriber is told "resync" (its request
// evaluates again, its holder checks its term) once now and once the
// connection listens again, since notifications meanwhile are lost.
type listener struct {
	l      *Locker
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	subs map[string]chan string

	received atomic.Int64 // notifications, for tests
}

const resync = "resync"

// listener starts the Locker's listener on first use; it is listening
// when this returns.
func (l *Locker) listener(ctx context.Context) (*listener, error) {
	l.mu.Lock()
	lis := l.lis
	l.mu.Unlock()
	if lis != nil {
		return lis, nil
	}
	c, err := l.listenConn(ctx)
	if err != nil {
		return nil, err
	}
	lis = &listener{l: l, subs: map[string]chan string{}, done: make(chan struct{})}
	lis.ctx, lis.cancel = context.WithCancel(context.Background())
	l.mu.Lock()
	if l.lis != nil || l.closed {
		l.mu.Unlock()
		c.Close(context.Background())
		if l.closed {
			return nil, context.Canceled
		}
		return l.lis, nil
	}
	l.lis = lis
	l.mu.Unlock()
	go lis.run(c)
	return lis, nil
}

func (l *Locker) listenConn(ctx context.Context) (*pgx.Conn, error) {
	c, err := l.connect(ctx, "listen", map[string]string{"statement_timeout": "10000"})
	if err != nil {
		return nil, err
	}
	if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{l.chname}.Sanitize()); err != nil {
		c.Close(context.Background())
		return nil, l.pgErr("LISTEN", err)
	}
	return c, nil
}

func (lis *listener) run(c *pgx.Conn) {
	defer close(lis.done)
	fails := 0
	for {
		for c != nil {
			n, err := c.WaitForNotification(lis.ctx)
			if err != nil {
				c.Close(context.Background())
				c = nil
				break
			}
			fails = 0
			lis.received.Add(1)
			key, kind, _ := strings.Cut(n.Payload, " ")
			lis.send(key, kind)
		}
		if lis.ctx.Err() != nil {
			return
		}
		lis.broadcast()
		// Back off while the server cannot be reached; the requests'
		// own sessions fail meanwhile, so nothing waits on this alone.
		fails++
		t := time.NewTimer(min(time.Duration(fails)*100*time.Millisecond, 2*time.Second))
		select {
		case <-lis.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(lis.ctx, 10*time.Second)
		c, _ = lis.l.listenConn(ctx)
		cancel()
		if c != nil {
			lis.broadcast()
		}
	}
}

func (lis *listener) send(key, kind string) {
	lis.mu.Lock()
	ch := lis.subs[key]
	lis.mu.Unlock()
	if ch != nil {
		select {
		case ch <- kind:
		default: // full: a message is pending and will make it look again
		}
	}
}

func (lis *listener) broadcast() {
	lis.mu.Lock()
	defer lis.mu.Unlock()
	for _, ch := range lis.subs {
		select {
		case ch <- resync:
		default:
		}
	}
}

// sub subscribes to the notifications of key until unsub.
func (lis *listener) sub(key string) (<-chan string, func()) {
	ch := make(chan string, 8)
	lis.mu.Lock()
	lis.subs[key] = ch
	lis.mu.Unlock()
	return ch, func() {
		lis.mu.Lock()
		delete(lis.subs, key)
		lis.mu.Unlock()
	}
}

func (lis *listener) close() {
	lis.cancel()
	<-lis.done
}
