package bus

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/layout"
	"github.com/leaderrun/leaderrun/oslock"
)

// Handler answers a member's request on the leader. Its ctx ends when the
// leadership ends, the server stops, or the member hangs up. The returned
// bytes go back to the member; a non-nil error reaches it as ErrHandler
// with the error's text. Handlers run concurrently, each in its own
// goroutine.
type Handler func(ctx context.Context, req Request) ([]byte, error)

// Request is a member's request as the leader's Handler sees it.
type Request struct {
	// PID and UID are the member's, as the kernel reported them when it
	// connected (PID falls back to what the member said where the
	// platform does not report it).
	PID, UID int
	// Data belongs to the handler.
	Data []byte
}

// ServerOption configures Listen and Serve.
type ServerOption func(*serverConfig)

type serverConfig struct {
	handler    Handler
	maxMsg     int
	queueLen   int
	queueBytes int
	grace      time.Duration
}

// WithHandler answers members' requests with h. Without it, requests fail
// with ErrNoHandler.
func WithHandler(h Handler) ServerOption { return func(c *serverConfig) { c.handler = h } }

// MaxMessageSize sets the largest payload of a message, request or reply,
// in bytes. Default DefaultMaxMessageSize (1 MiB). Members learn it when
// they connect and refuse larger payloads locally with ErrTooLarge.
func MaxMessageSize(n int) ServerOption { return func(c *serverConfig) { c.maxMsg = n } }

// QueueLength sets how many frames may wait to be written to one member
// before it is cut off as a slow consumer. Default 4096. Every queue is
// also bounded to 64 MiB.
func QueueLength(n int) ServerOption { return func(c *serverConfig) { c.queueLen = n } }

// withGrace changes defaultGrace, for tests on loaded machines.
func withGrace(d time.Duration) ServerOption { return func(c *serverConfig) { c.grace = d } }

const (
	defaultQueueLen   = 4096
	defaultQueueBytes = 64 << 20
	// defaultGrace is how long a member that is being cut off has to take
	// what was already written, and the reason, before its connection is
	// closed regardless. It bounds what a stuck member costs: one
	// goroutine and one descriptor for this long, never the leader's time.
	defaultGrace = 2 * time.Second
	// helloTimeout bounds the wait for a new connection's hello.
	helloTimeout = 5 * time.Second
	// maxInFlight bounds concurrent requests per member; further requests
	// wait on that member's connection only.
	maxInFlight = 64
)

// Server is the leader's side of the bus: it owns the socket while the
// leadership lasts. Create it with Listen, run it with Serve.
type Server struct {
	lead   *elect.Leadership
	cfg    serverConfig
	dir    *oslock.Dir
	ln     *sockListener
	sockID oslock.FileID
	pid    int
	uid    int

	// ctx ends when serving stops; it is the parent of handlers' contexts.
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu     sync.Mutex
	seq    uint64
	conns  []*conn
	closed bool
	served bool

	wg       sync.WaitGroup
	stopOnce sync.Once
}

func sockName(name string) string { return layout.SocketFile(name) }

// Listen starts serving the bus of lead's name: it creates the socket
// <dir>/<name>.sock (mode 0600) and announces lead to every member that
// connects. A stale socket left by an earlier leader is replaced, which is
// safe only because lead holds the lock: no one else ever removes it.
// Members are accepted once Serve runs. Listen needs an exclusive
// leadership (ErrNotExclusive).
func Listen(lead *elect.Leadership, opts ...ServerOption) (*Server, error) {
	cfg := serverConfig{maxMsg: DefaultMaxMessageSize, queueLen: defaultQueueLen, queueBytes: defaultQueueBytes, grace: defaultGrace}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case cfg.maxMsg <= 0 || cfg.maxMsg > 1<<30:
		return nil, fmt.Errorf("bus: MaxMessageSize %d out of range (1 to 1 GiB)", cfg.maxMsg)
	case cfg.queueLen < 2:
		return nil, fmt.Errorf("bus: QueueLength %d too small (at least 2)", cfg.queueLen)
	case lead.Mode() != elect.Exclusive:
		return nil, ErrNotExclusive
	}
	if err := lead.Err(); err != nil {
		return nil, fmt.Errorf("bus: leadership already ended: %w", err)
	}
	if err := elect.ValidateName(lead.Name()); err != nil {
		return nil, err
	}
	// The directory the Locker checked and granted in, not its path
	// reopened: a directory put at the path since is not served.
	dir, err := lead.OpenDir()
	if err != nil {
		return nil, fmt.Errorf("bus: %w", err)
	}
	s := &Server{lead: lead, cfg: cfg, dir: dir, pid: os.Getpid(), uid: os.Geteuid()}
	if err := s.listen(); err != nil {
		dir.Close()
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancelCause(lead.Context())
	return s, nil
}

// listen binds under a temporary name and renames the socket into place
// once it accepts, so that a member woken by the directory event never
// finds a socket that refuses connections, and a stale socket is replaced
// atomically rather than removed first.
func (s *Server) listen() error {
	name := sockName(s.lead.Name())
	tmp := layout.SocketTempFile(s.lead.Name())
	if err := s.dir.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// The path is renamed away below, so the listener never unlinks it
	// (that could remove a later leader's socket).
	ln, err := listenUnix(s.dir.ResolvedPath(tmp), filepath.Join(s.dir.Path(), name))
	if err != nil {
		return fmt.Errorf("bus: cannot listen on %s/%s: %w", s.dir.Path(), tmp, err)
	}
	fail := func(err error) error {
		ln.Close()
		s.dir.Remove(tmp)
		return err
	}
	if err := os.Chmod(s.dir.ResolvedPath(tmp), 0o600); err != nil {
		return fail(err)
	}
	if err := s.dir.Rename(tmp, name); err != nil {
		return fail(err)
	}
	id, _, err := s.dir.Lstat(name)
	if err != nil {
		return fail(err)
	}
	s.ln, s.sockID = ln, id
	return nil
}

// Serve accepts members until ctx ends, the leadership ends, or Close is
// called. It then tells every member that the leader steps down, removes
// the socket if the leadership still lasts, and returns once every
// connection and handler has finished (connections are given about two
// seconds to take what is queued). It returns the cause: context.Cause(ctx),
// the leadership's Err, or nil after Close.
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	if s.served || s.closed {
		s.mu.Unlock()
		return fmt.Errorf("%w: Serve called twice or after Close", ErrClosed)
	}
	s.served = true
	// Added under the lock that stop takes before it waits, so that the
	// Add happens before the Wait or not at all (sync.WaitGroup's rule):
	// the accept loop and the socket keeper.
	s.wg.Add(2)
	ln := s.ln
	s.mu.Unlock()
	go s.acceptLoop(ln)
	go s.keepSocket()
	var cause error
	select {
	case <-ctx.Done():
		cause = context.Cause(ctx)
	case <-s.ctx.Done():
		if err := s.lead.Err(); err != nil {
			cause = err
		}
	}
	s.stop(cause)
	return cause
}

// Serve is Listen followed by Server.Serve: it serves lead's bus until ctx
// or the leadership ends.
func Serve(ctx context.Context, lead *elect.Leadership, opts ...ServerOption) error {
	s, err := Listen(lead, opts...)
	if err != nil {
		return err
	}
	return s.Serve(ctx)
}

// Close stops serving as the end of Serve's ctx would, and waits as Serve
// does. It is idempotent and safe to call concurrently with Serve, before
// or while it runs: a running Serve returns nil, one not yet started
// returns ErrClosed. After Close, Serve and Publish fail with ErrClosed.
func (s *Server) Close() error {
	s.stop(nil)
	return nil
}

func (s *Server) stop(cause error) {
	s.stopOnce.Do(func() {
		if cause == nil {
			cause = ErrClosed
		}
		// From here on Serve, join and publish see closed: nothing new
		// starts, and the WaitGroup below only shrinks.
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel(cause)
		s.mu.Lock()
		s.ln.Close()
		s.mu.Unlock()
		s.removeSocket()
		s.dir.Close()
		s.forgetRetained()
		s.mu.Lock()
		y := bye{reason: byeStepDown, lastSeq: s.seq}
		for _, c := range s.conns {
			c.end(y, false)
		}
		s.mu.Unlock()
	})
	s.wg.Wait()
}

// removeSocket unlinks the socket only while the leadership lasts and only
// if it is still the one this server created: once the lock is gone, the
// name may already belong to the next leader.
func (s *Server) removeSocket() {
	if s.lead.Err() != nil {
		return
	}
	name := sockName(s.lead.Name())
	s.mu.Lock()
	ours := s.sockID
	s.mu.Unlock()
	if id, _, err := s.dir.Lstat(name); err == nil && id == ours {
		s.dir.Remove(name)
	}
}

// keepSocket puts the socket back when its name is removed or replaced
// (a cleaner, a user's rm) while the leadership lasts, so that new members
// can still find the leader; members already connected keep their
// connections. It learns of the removal through the process's one inotify
// instance; where none can be had, or where the lock directory itself was
// moved away, a removed socket stays removed until the next term.
func (s *Server) keepSocket() {
	defer s.wg.Done()
	if hook := keepHook.Load(); hook != nil {
		defer (*hook)()
	}
	name := sockName(s.lead.Name())
	for {
		w, err := oslock.WatchPath(filepath.Join(s.lead.Dir(), name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return
		}
		// The socket is looked at once the watch is armed, so that one
		// removed or replaced before (found by CI: the test removes it
		// right after the first member's event) is put back at once, and
		// after each event, which may leave it in place. stop closes s.dir
		// once it has set closed, so s.dir is looked at under s.mu only
		// before that.
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			w.Stop()
			return
		}
		if id, _, err := s.dir.Lstat(name); err == nil && id == s.sockID {
			s.mu.Unlock()
			if w == nil {
				// Our socket is in place but its path is gone (ENOENT):
				// the directory was moved or replaced, where no member
				// can look for it. The next term binds anew.
				return
			}
			select {
			case <-s.ctx.Done():
				w.Stop()
				return
			case <-w.C:
			}
			w.Stop()
			continue
		}
		w.Stop()
		old := s.ln
		if err := s.listen(); err != nil {
			s.mu.Unlock()
			return
		}
		s.wg.Add(1)
		go s.acceptLoop(s.ln)
		s.mu.Unlock()
		old.Close()
	}
}

// keepHook, when set by a test, runs when keepSocket returns.
var keepHook atomic.Pointer[func()]

func (s *Server) acceptLoop(ln *sockListener) {
	defer s.wg.Done()
	for {
		uc, err := ln.accept()
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, errSockClosed) {
				return
			}
			// EMFILE and the like: back off instead of spinning, and
			// let the members already connected carry on.
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		s.wg.Add(1)
		go s.handle(uc)
	}
}

// Publish sends data to every member, in one total order with the members'
// publications, and returns its sequence number in this term. It never
// blocks: a member whose queue is full is cut off instead. data may be
// reused once Publish returns.
func (s *Server) Publish(data []byte) (seq uint64, err error) {
	if len(data) > s.cfg.maxMsg {
		return 0, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(data), s.cfg.maxMsg)
	}
	return s.publish(nil, 0, s.pid, data)
}

// publish sequences one message; from, if set, is the publishing member,
// which also gets an ack. The lock makes the order total: every queue
// receives the messages in sequence order.
func (s *Server) publish(from *conn, id uint64, pid int, data []byte) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	s.seq++
	f := message{epoch: s.lead.Epoch(), seq: s.seq, pid: uint32(pid), data: data}.encode()
	for _, c := range s.conns {
		if !c.publishOnly {
			c.enqueue(f)
		}
	}
	if from != nil {
		from.enqueue(encodeAck(id, s.seq))
	}
	return s.seq, nil
}

// Members returns how many members are connected.
func (s *Server) Members() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// join adds c and queues its hello first, under the lock that orders
// messages, so that the hello's next sequence number is exact.
func (s *Server) join(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	h := serverHello{
		version: protoVersion,
		pid:     uint32(s.pid),
		epoch:   s.lead.Epoch(),
		since:   s.lead.Since().UnixNano(),
		mode:    uint8(s.lead.Mode()),
		nextSeq: s.seq + 1,
		maxMsg:  uint32(s.cfg.maxMsg),
		name:    s.lead.Name(),
	}
	c.enqueue(h.encode())
	s.conns = append(s.conns, c)
	return true
}

func (s *Server) leave(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.conns {
		if x == c {
			last := len(s.conns) - 1
			s.conns[i] = s.conns[last]
			s.conns[last] = nil
			s.conns = s.conns[:last]
			return
		}
	}
}
