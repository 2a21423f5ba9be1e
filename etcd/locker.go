package etcd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/remote"
)

// DefaultPrefix is where a Locker keeps its keys unless Config.Prefix says
// otherwise.
const DefaultPrefix = "/leaderrun/v1/"

// DefaultTTL and MinTTL bound Config.TTL: etcd leases count whole seconds.
const (
	DefaultTTL = 10 * time.Second
	MinTTL     = 2 * time.Second
)

// Config says which etcd to use and how long a session lasts. Endpoints
// or Client is required.
type Config struct {
	// Endpoints of the etcd cluster, such as "http://10.0.0.1:2379".
	// Ignored when Client is set.
	Endpoints []string
	// Client is an etcd client to use instead of dialling Endpoints. The
	// Locker does not close it.
	Client *clientv3.Client
	// Prefix of every key the Locker writes. Default DefaultPrefix. All
	// contenders of a name must use the same prefix.
	Prefix string
	// TTL of the session's lease, in whole seconds. Default DefaultTTL,
	// at least MinTTL. After a holder's host dies or is cut off, the lock
	// passes within TTL.
	TTL time.Duration
	// Margin by which a term ends before the lease could expire on the
	// server. Default max(1s, TTL/5); at most TTL/2.
	Margin time.Duration
	// Host is recorded with every request for Query. Default
	// os.Hostname().
	Host string
	// DialTimeout for Endpoints. Default 5s.
	DialTimeout time.Duration
}

// Locker grants leadership of names kept in etcd. It is safe for
// concurrent use; one Locker can hold and wait for many names. All its
// requests share one lease (its session); Close ends them all.
type Locker struct {
	cli    *clientv3.Client
	own    bool // cli was dialled by Open
	prefix string
	ttl    time.Duration
	margin time.Duration
	host   string

	closing context.Context
	stop    context.CancelFunc
	active  sync.WaitGroup

	grantMu sync.Mutex // one lease grant at a time
	mu      sync.Mutex
	closed  bool
	sess    *session
	seq     uint64
	terms   map[*elect.Leadership]*session // held terms, and their session
	epochs  map[string]seenEpoch           // by name
}

// seenEpoch is the epoch key of a name as this Locker last saw it: its
// value, its ModRevision, and the revision it was read at. A grant that
// finds it unchanged needs no read first; the grant txn's compare of the
// ModRevision makes a stale one harmless.
type seenEpoch struct {
	epoch    uint64
	mod, rev int64
}

func (l *Locker) lastEpoch(name string) (uint64, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.epochs[name]
	return e.epoch, e.mod
}

func (l *Locker) noteEpoch(name string, epoch uint64, mod, rev int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.epochs == nil {
		l.epochs = map[string]seenEpoch{}
	}
	if e, ok := l.epochs[name]; !ok || rev > e.rev {
		l.epochs[name] = seenEpoch{epoch, mod, rev}
	}
}

// Open checks cfg and returns a Locker. It does not contact etcd: the
// first request does.
func Open(cfg Config) (*Locker, error) {
	l := &Locker{prefix: cfg.Prefix, ttl: cfg.TTL, margin: cfg.Margin, host: cfg.Host, terms: map[*elect.Leadership]*session{}}
	if l.prefix == "" {
		l.prefix = DefaultPrefix
	}
	if !strings.HasSuffix(l.prefix, "/") {
		l.prefix += "/"
	}
	if l.ttl == 0 {
		l.ttl = DefaultTTL
	}
	switch {
	case l.ttl < MinTTL:
		return nil, fmt.Errorf("%w: etcd TTL %v is below the minimum %v", elect.ErrInvalidRequest, cfg.TTL, MinTTL)
	case l.ttl%time.Second != 0:
		return nil, fmt.Errorf("%w: etcd TTL %v is not a whole number of seconds (etcd leases count seconds)", elect.ErrInvalidRequest, cfg.TTL)
	}
	if l.margin == 0 {
		l.margin = max(time.Second, l.ttl/5)
	}
	if l.margin < 0 || l.margin > l.ttl/2 {
		return nil, fmt.Errorf("%w: etcd margin %v must be positive and at most half the TTL %v", elect.ErrInvalidRequest, cfg.Margin, l.ttl)
	}
	if l.host == "" {
		l.host, _ = os.Hostname()
	}
	switch {
	case cfg.Client != nil:
		l.cli = cfg.Client
	case len(cfg.Endpoints) == 0:
		return nil, errors.New("etcd: no endpoints; give Config.Endpoints (such as http://127.0.0.1:2379) or Config.Client")
	default:
		dt := cfg.DialTimeout
		if dt == 0 {
			dt = 5 * time.Second
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: dt, Logger: zap.NewNop()})
		if err != nil {
			return nil, fmt.Errorf("etcd: %w", err)
		}
		l.cli, l.own = cli, true
	}
	l.closing, l.stop = context.WithCancel(context.Background())
	return l, nil
}

// Client is the etcd client the Locker uses.
func (l *Locker) Client() *clientv3.Client { return l.cli }

// Prefix is the key prefix, ending in "/".
func (l *Locker) Prefix() string { return l.prefix }

// begin registers a request; the returned context also ends when the
// Locker is closed.
func (l *Locker) begin(ctx context.Context) (context.Context, func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, nil, elect.ErrClosed
	}
	l.active.Add(1)
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.closing, func() { cancel(elect.ErrClosed) })
	return ctx, func() {
		stop()
		cancel(nil)
		l.active.Done()
	}, nil
}

func (l *Locker) nextID(s *session) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	return fmt.Sprintf("%016x-%d", int64(s.id), l.seq)
}

func (l *Locker) track(t *elect.Leadership, s *session) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return elect.ErrClosed
	}
	l.terms[t] = s
	return nil
}

// Lease returns the lease that lead's term is on, so that another process
// (leaderrun's watchdog) can end the term with a Revoke once the holder
// has died or stopped renewing it. Revoking it ends every term and request
// of this Locker's session. It fails for a leadership l did not grant or
// that has ended.
func (l *Locker) Lease(lead *elect.Leadership) (clientv3.LeaseID, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.terms[lead]
	if !ok || lead.Err() != nil {
		return 0, fmt.Errorf("etcd: the leadership of %s is not a live term of this Locker", lead.Name())
	}
	return s.id, nil
}

// untrack forgets a released term; the last term of an ended session to go
// gives its lease back (see session.end).
func (l *Locker) untrack(t *elect.Leadership) {
	l.mu.Lock()
	s := l.terms[t]
	delete(l.terms, t)
	l.mu.Unlock()
	if s != nil {
		l.revokeIfIdle(s)
	}
}

// held reports whether any term of s is still held.
func (l *Locker) held(s *session) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ts := range l.terms {
		if ts == s {
			return true
		}
	}
	return false
}

// revokeIfIdle revokes the lease of an ended session once none of its
// terms is held any more.
func (l *Locker) revokeIfIdle(s *session) {
	select {
	case <-s.done:
	default:
		return // a live session keeps its lease
	}
	if !l.held(s) {
		s.revoke()
	}
}

// Close ends every request still waiting (they return elect.ErrClosed),
// releases every leadership granted by l, revokes the session's lease and
// closes the client if Open dialled it. It is idempotent.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.stop()
	l.active.Wait()
	l.mu.Lock()
	terms := make([]*elect.Leadership, 0, len(l.terms))
	for t := range l.terms {
		terms = append(terms, t)
	}
	s := l.sess
	l.sess = nil
	l.mu.Unlock()
	var errs []error
	for _, t := range terms {
		errs = append(errs, t.Release())
	}
	if s != nil {
		s.end(elect.ErrClosed, true)
		<-s.stopped
		s.revoke() // if it had ended before, with terms held
	}
	if l.own {
		errs = append(errs, l.cli.Close())
	}
	return errors.Join(errs...)
}

// TryAcquire asks once for name in mode and never waits. It returns ok
// false and no error when the lock is held or others are queued.
func (l *Locker) TryAcquire(ctx context.Context, name string, mode elect.Mode) (*elect.Leadership, bool, error) {
	return remote.TryAcquire(ctx, l, name, mode)
}

var _ elect.Backend = (*Locker)(nil)
