package bus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/oslock"
)

// DialOption configures Dial.
type DialOption func(*dialConfig)

type dialConfig struct {
	wait        bool
	publishOnly bool
	buffer      int
	bufferSet   bool
}

// WaitForLeader makes Dial, Publish and Request wait, until their context
// ends, while nobody leads, instead of failing with ErrNoLeader.
func WaitForLeader() DialOption { return func(c *dialConfig) { c.wait = true } }

// PublishOnly asks the leader not to send messages to this client, for a
// member that only publishes or makes requests (such as a second instance
// handing its arguments to the first) and never reads Events. Such a
// client is never cut off as a slow consumer; it still receives
// EventLeader and EventLost, and drops them if nobody reads them: its
// Events keeps the last publishOnlyBuffer (16) unread ones unless
// EventBuffer says otherwise.
func PublishOnly() DialOption { return func(c *dialConfig) { c.publishOnly = true } }

// EventBuffer sets how many events may wait in Events before the client
// counts as a slow consumer: it then drops its connection with
// ErrSlowConsumer, delivers what it had, and reconnects, reporting the
// gap. Default 1024.
func EventBuffer(n int) DialOption {
	return func(c *dialConfig) { c.buffer, c.bufferSet = n, true }
}

const defaultEventBuffer = 1024

// publishOnlyBuffer is a publish-only client's default Events buffer: it
// only ever holds leader changes, and a second instance dialling to hand
// over its arguments should not allocate room for 1024 events.
const publishOnlyBuffer = 16

// Client is a member's connection to the bus of one name. It reconnects by
// itself whenever a new leader serves. Its methods are safe for concurrent
// use.
type Client struct {
	dir    *oslock.Dir
	name   string
	cfg    dialConfig
	uid    int
	events chan Event

	ctx    context.Context // the client's lifetime, until Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	sess    *session      // nil between leaders
	changed chan struct{} // closed and replaced whenever sess changes
	leader  Leader

	// Owned by the goroutine that runs sessions one after the other.
	seen               bool
	lastEpoch, lastSeq uint64
	clean              bool // the last session ended with a step-down at lastSeq

	closeOnce sync.Once
}

// Dial connects to the leader of name in the lock directory dir and starts
// receiving. It fails with ErrNoLeader when nobody leads, unless
// WaitForLeader is given; then it waits until a leader serves or ctx ends,
// returning ctx's error. ctx bounds only Dial itself; the client lives
// until Close.
func Dial(ctx context.Context, dir, name string, opts ...DialOption) (*Client, error) {
	c, err := newClient(dir, name, opts)
	if err != nil {
		return nil, err
	}
	s, err := c.connect(ctx)
	if errors.Is(err, ErrNoLeader) && c.cfg.wait {
		s, err = c.await(ctx)
	}
	if err != nil {
		c.cancel()
		c.dir.Close()
		return nil, err
	}
	c.install(s)
	c.wg.Add(1)
	go c.run(s)
	return c, nil
}

// newClient checks the options and the name and opens the directory, for
// Dial and DialLazy.
func newClient(dir, name string, opts []DialOption) (*Client, error) {
	cfg := dialConfig{buffer: defaultEventBuffer}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.publishOnly && !cfg.bufferSet {
		cfg.buffer = publishOnlyBuffer
	}
	if cfg.buffer < 1 {
		return nil, fmt.Errorf("bus: EventBuffer %d too small (at least 1)", cfg.buffer)
	}
	if err := elect.ValidateName(name); err != nil {
		return nil, err
	}
	// Reopened by path, with the checks relaxed: a client only connects,
	// and the peer's uid is checked on every connection, so the directory
	// only needs to be ours.
	d, err := oslock.OpenDir(dir, oslock.DirOptions{GroupShared: true, AllowUnsafeFS: true})
	if err != nil {
		return nil, err
	}
	c := &Client{dir: d, name: name, cfg: cfg, uid: os.Geteuid(),
		events: make(chan Event, cfg.buffer), changed: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Events delivers messages and leader changes in order. It is closed after
// Close. A client that leaves more than EventBuffer events unread is cut
// off as a slow consumer (see the package documentation).
func (c *Client) Events() <-chan Event { return c.events }

// Leader returns the leader the client is connected to, and false between
// leaders.
func (c *Client) Leader() (Leader, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader, c.sess != nil
}

// Close disconnects and stops reconnecting. Events is closed once the
// client has stopped. Close is idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.mu.Lock()
		s := c.sess
		c.mu.Unlock()
		if s != nil {
			s.fail(ErrClosed)
		}
		c.wg.Wait()
		c.dir.Close()
	})
	return nil
}

// Publish sends data to every member, the publisher included, and returns
// once the leader has given it its place in the order. It fails with
// ErrNoLeader between leaders (or waits, with WaitForLeader), ErrTooLarge
// above the leader's limit, and ErrLeaderChanged if the connection ended
// after sending: the message may then have been delivered or not. If ctx
// ends first, Publish returns ctx's error and the message may still be
// delivered.
func (c *Client) Publish(ctx context.Context, data []byte) error {
	_, err := c.call(ctx, fPublish, data)
	return err
}

// Request sends data to the leader's Handler and returns its reply. Errors
// are as for Publish, plus ErrHandler with the handler's error text and
// ErrNoHandler. ErrLeaderChanged means the old leader may or may not have
// handled the request; repeat it only if that is safe.
func (c *Client) Request(ctx context.Context, data []byte) ([]byte, error) {
	r, err := c.call(ctx, fRequest, data)
	if err != nil {
		return nil, err
	}
	switch r.status {
	case replyOK:
		return r.data, nil
	case replyNoHandler:
		return nil, ErrNoHandler
	case replyTooLarge:
		return nil, fmt.Errorf("%w: %s", ErrTooLarge, r.data)
	}
	return nil, fmt.Errorf("%w: %s", ErrHandler, r.data)
}

func (c *Client) call(ctx context.Context, t frameType, data []byte) (result, error) {
	for {
		s, err := c.current(ctx)
		if err != nil {
			return result{}, err
		}
		if len(data) > int(s.hello.maxMsg) {
			return result{}, fmt.Errorf("%w: %d bytes, the leader's limit is %d", ErrTooLarge, len(data), s.hello.maxMsg)
		}
		id, ch, ok := s.register()
		if !ok {
			continue // ended before sending: nothing reached the leader
		}
		select {
		case s.out <- encodeID(t, id, data):
		case <-s.dead:
			s.unregister(id)
			continue
		case <-ctx.Done():
			s.unregister(id)
			return result{}, ctx.Err()
		}
		select {
		case r := <-ch:
			return r, r.err
		case <-ctx.Done():
			s.unregister(id)
			return result{}, ctx.Err()
		}
	}
}

// current returns the live session, or waits for one with WaitForLeader.
func (c *Client) current(ctx context.Context) (*session, error) {
	for {
		c.mu.Lock()
		s, changed := c.sess, c.changed
		c.mu.Unlock()
		if s != nil {
			select {
			case <-s.dead:
			default:
				return s, nil
			}
		}
		if c.ctx.Err() != nil {
			return nil, ErrClosed
		}
		if !c.cfg.wait {
			return nil, ErrNoLeader
		}
		select {
		case <-changed:
		case <-c.ctx.Done():
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c *Client) setSession(s *session) {
	c.mu.Lock()
	c.sess = s
	if s != nil {
		c.leader = s.hello.leader()
	}
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// install makes s the current session. Its EventLeader goes before any
// of its messages, which the reader started last delivers; Publish and
// Request may use s as soon as the application has seen that event.
func (c *Client) install(s *session) {
	gap := c.startGap(s.hello)
	c.setSession(s)
	if !c.emit(Event{Kind: EventLeader, Leader: s.hello.leader(), Gap: gap}) {
		s.fail(ErrClosed)
	}
	s.start()
}

// run follows one installed session after another until Close.
func (c *Client) run(s *session) {
	defer c.wg.Done()
	defer close(c.events)
	for {
		select {
		case <-s.done:
		case <-c.ctx.Done():
			// Close may have looked before s was installed.
			s.fail(ErrClosed)
			<-s.done
		}
		c.setSession(nil)
		if c.ctx.Err() != nil {
			return
		}
		if y := s.bye; y != nil && y.reason == byeStepDown && y.lastSeq == c.lastSeq {
			c.clean = true
		}
		if !c.emit(Event{Kind: EventLost, Leader: s.hello.leader(), Err: s.err}) {
			return
		}
		var err error
		if s, err = c.await(c.ctx); err != nil {
			return
		}
		c.install(s)
	}
}

// startGap decides whether messages may have been missed before the first
// message of a new session, and moves the sequence to it.
func (c *Client) startGap(h serverHello) bool {
	gap := false
	switch {
	case !c.seen || c.cfg.publishOnly:
	case h.epoch == c.lastEpoch:
		gap = h.nextSeq != c.lastSeq+1
	default:
		gap = !c.clean || h.nextSeq != 1
	}
	c.seen, c.clean = true, false
	c.lastEpoch, c.lastSeq = h.epoch, h.nextSeq-1
	return gap
}

// emit delivers a leader change. A publish-only client may not be reading
// at all, so it drops them rather than stall its reconnection.
func (c *Client) emit(ev Event) bool {
	if c.cfg.publishOnly {
		select {
		case c.events <- ev:
		default:
		}
		return c.ctx.Err() == nil
	}
	select {
	case c.events <- ev:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// await waits for a leader: it watches the directory first, then tries, so
// that a socket appearing in between is not missed. Without a leader it
// sleeps until the directory says a socket appeared; a leader that is
// there but fails the handshake is tried again with a growing pause.
// awaitHook, when set by a test, runs each time await is about to sleep.
var awaitHook atomic.Pointer[func()]

func (c *Client) await(ctx context.Context) (*session, error) {
	w, werr := watchFor(c.dir.Path(), sockName(c.name))
	defer w.close()
	pause := 50 * time.Millisecond
	for {
		s, err := c.connect(ctx)
		if err == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var wake <-chan struct{}
		var timer *time.Timer
		if errors.Is(err, ErrNoLeader) && werr == nil {
			wake = w.sig
		} else {
			// No watcher (out of inotify instances), or a leader that
			// is stuck or refuses us: a bounded retry is all we can do.
			timer = time.NewTimer(pause)
			pause = min(2*pause, 5*time.Second)
		}
		var tick <-chan time.Time
		if timer != nil {
			tick = timer.C
		}
		if hook := awaitHook.Load(); hook != nil {
			(*hook)()
		}
		select {
		case <-wake:
		case <-tick:
		case <-ctx.Done():
		case <-c.ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		if c.ctx.Err() != nil {
			return nil, ErrClosed
		}
	}
}

// connect makes one attempt to reach the leader and read its hello.
func (c *Client) connect(ctx context.Context) (*session, error) {
	sock := sockName(c.name)
	uc, err := dialUnix(ctx, c.dir.ResolvedPath(sock), filepath.Join(c.dir.Path(), sock))
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, ErrNoLeader
		}
		return nil, fmt.Errorf("bus: cannot connect to the leader of %s in %s: %w", c.name, c.dir.Path(), err)
	}
	if uid, _, err := peerCred(uc); err == nil && uid != c.uid {
		uc.Close()
		return nil, fmt.Errorf("%w: the socket of %s is served by uid %d", ErrRefused, c.name, uid)
	}
	deadline := time.Now().Add(helloTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	uc.SetDeadline(deadline)
	var flags uint8
	if c.cfg.publishOnly {
		flags |= flagPublishOnly
	}
	fr := newFrameReader(uc, maxHelloText+frameSlack)
	h, err := handshake(uc, fr, clientHello{version: protoVersion, pid: uint32(os.Getpid()), flags: flags})
	if err != nil {
		fr.release()
		uc.Close()
		return nil, err
	}
	uc.SetDeadline(time.Time{})
	fr.max = int(h.maxMsg) + frameSlack
	return newSession(c, uc, fr, h), nil
}

func handshake(uc io.Writer, fr *frameReader, ch clientHello) (serverHello, error) {
	_, werr := uc.Write(ch.encode())
	// A leader that refuses us may have said why and hung up before our
	// hello arrived: read its bye even if the write failed.
	t, body, err := fr.next()
	if err != nil {
		if werr != nil {
			err = werr
		}
		return serverHello{}, fmt.Errorf("bus: handshake: %w", err)
	}
	switch t {
	case fServerHello:
	case fBye:
		y, err := decodeBye(body)
		if err != nil {
			return serverHello{}, err
		}
		if y.reason == byeStepDown {
			return serverHello{}, ErrNoLeader
		}
		return serverHello{}, byeErr(y.reason, y.text)
	default:
		return serverHello{}, fmt.Errorf("%w: expected the leader's hello, got frame type %d", ErrProtocol, t)
	}
	h, err := decodeServerHello(body)
	if err == nil && h.version != protoVersion {
		err = fmt.Errorf("%w: leader speaks protocol %d, this client %d", ErrProtocol, h.version, protoVersion)
	}
	return h, err
}
