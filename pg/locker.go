package pg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/remote"
)

// DefaultSchema is the PostgreSQL schema a Locker keeps its tables in
// unless Config.Schema says otherwise.
const DefaultSchema = "leaderrun"

// DefaultTTL and MinTTL bound Config.TTL.
const (
	DefaultTTL = 10 * time.Second
	MinTTL     = 2 * time.Second
)

// MinServerVersion is the oldest PostgreSQL a Locker runs on: 14 brought
// idle_session_timeout, by which the server ends the connection of a
// session that stopped renewing its lease.
const MinServerVersion = 14

// Config says which PostgreSQL to use and how long a session lasts.
type Config struct {
	// URL is the connection string as libpq takes it: a URL
	// (postgres://user:password@host:port/db?sslmode=verify-full) or
	// key=value pairs. What it leaves out comes from the PG* environment
	// variables (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGPASSFILE,
	// PGSSLMODE, PGSSLROOTCERT, ...) and libpq's defaults, as pgx's
	// ParseConfig reads them. Ignored when ConnConfig is set.
	URL string
	// ConnConfig, if set, is used instead of URL. It is copied for each
	// connection.
	ConnConfig *pgx.ConnConfig
	// Schema holds the Locker's tables and functions; created on first
	// use. Default DefaultSchema. All contenders of a name must use the
	// same database and schema.
	Schema string
	// TTL of the session's lease. Default DefaultTTL, at least MinTTL.
	// After a holder's host dies or is cut off, the lock passes within TTL.
	TTL time.Duration
	// Margin by which a term ends before the lease could expire by the
	// server's clock. Default max(1s, TTL/5); at most TTL/2.
	Margin time.Duration
	// Host is recorded with every request for Query. Default
	// os.Hostname().
	Host string
}

// Locker grants leadership of names kept in PostgreSQL. It is safe for
// concurrent use; one Locker can hold and wait for many names. All its
// requests share one session (a lease row and one connection); Close
// ends them all.
type Locker struct {
	cc     *pgx.ConnConfig
	schema string
	q      string // the schema, quoted
	ttl    time.Duration
	margin time.Duration
	host   string
	chname string // the channel this Locker LISTENs on
	keyseq uint64

	closing context.Context
	stop    context.CancelFunc
	active  sync.WaitGroup

	schemaMu sync.Mutex
	schemaOK bool

	lis *listener

	admin     lazyConn  // for Query, Watch and the bus's notifications
	ends      lazyConn  // for ends of sessions (EndSession, EndHolder)
	endsReady sync.Once // ends opened and readied ahead by the first waiter

	grantMu sync.Mutex // one session open at a time
	mu      sync.Mutex
	closed  bool
	sess    *session
	terms   map[*elect.Leadership]*holding

	watchMu  sync.Mutex
	watchers map[int64]*deathWatch
	spare    *pgx.Conn // a watch's connection kept for the next (keepSpare)
	// spareIdle is how long spare is kept: spareIdle, set by Open.
	spareIdle time.Duration

	roundTrips atomic.Int64 // statements on session connections, for the benchmarks
}

// Open checks cfg and returns a Locker. It does not contact the server:
// the first request does.
func Open(cfg Config) (*Locker, error) {
	l := &Locker{schema: cfg.Schema, ttl: cfg.TTL, margin: cfg.Margin, host: cfg.Host,
		terms: map[*elect.Leadership]*holding{}, watchers: map[int64]*deathWatch{}, spareIdle: spareIdle}
	if l.schema == "" {
		l.schema = DefaultSchema
	}
	if len(l.schema) > 63 {
		return nil, fmt.Errorf("%w: schema name %q is longer than PostgreSQL's 63 bytes", elect.ErrInvalidRequest, l.schema)
	}
	l.q = pgx.Identifier{l.schema}.Sanitize()
	if l.ttl == 0 {
		l.ttl = DefaultTTL
	}
	if l.ttl < MinTTL {
		return nil, fmt.Errorf("%w: PostgreSQL TTL %v is below the minimum %v", elect.ErrInvalidRequest, cfg.TTL, MinTTL)
	}
	if l.margin == 0 {
		l.margin = max(time.Second, l.ttl/5)
	}
	if l.margin < 0 || l.margin > l.ttl/2 {
		return nil, fmt.Errorf("%w: PostgreSQL margin %v must be positive and at most half the TTL %v", elect.ErrInvalidRequest, cfg.Margin, l.ttl)
	}
	if l.host == "" {
		l.host, _ = os.Hostname()
	}
	if cfg.ConnConfig != nil {
		l.cc = cfg.ConnConfig.Copy()
	} else {
		cc, err := pgx.ParseConfig(cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("pg: the connection string does not parse: %w", err)
		}
		l.cc = cc
	}
	l.chname = fmt.Sprintf("leaderrun_%d_%x", os.Getpid(), time.Now().UnixNano())
	l.closing, l.stop = context.WithCancel(context.Background())
	return l, nil
}

// Schema is the PostgreSQL schema of the Locker's tables.
func (l *Locker) Schema() string { return l.schema }

// TTL is the session lease's TTL.
func (l *Locker) TTL() time.Duration { return l.ttl }

// ConnConfig is a copy of the connection settings, as parsed.
func (l *Locker) ConnConfig() *pgx.ConnConfig { return l.cc.Copy() }

// connect opens a connection with the given server settings added.
func (l *Locker) connect(ctx context.Context, what string, params map[string]string) (*pgx.Conn, error) {
	cc := l.cc.Copy()
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	if cc.RuntimeParams["application_name"] == "" {
		cc.RuntimeParams["application_name"] = l.appName(what)
	}
	if cc.RuntimeParams["plan_cache_mode"] == "" {
		// Every statement here, and in the functions, has the same plan
		// whatever its parameters (a few rows by key): without this, a
		// backend plans each of them again on each of its first five
		// runs, and a watchdog's end of a dead term, on a connection
		// warmed once, is such a run (BenchmarkEndSession).
		cc.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	for k, v := range params {
		cc.RuntimeParams[k] = v
	}
	c, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, l.pgErr("connecting", err)
	}
	if v := serverMajor(c); v != 0 && v < MinServerVersion {
		c.Close(context.Background())
		return nil, fmt.Errorf("pg: the server is PostgreSQL %d; leaderrun needs %d or later (idle_session_timeout)", v, MinServerVersion)
	}
	return c, nil
}

// appName is the application_name of a connection of the Locker's for
// what.
func (l *Locker) appName(what string) string {
	return fmt.Sprintf("leaderrun %s %s pid %d", what, l.host, os.Getpid())
}

func serverMajor(c *pgx.Conn) int {
	v := c.PgConn().ParameterStatus("server_version")
	n, _ := strconv.Atoi(strings.SplitN(strings.SplitN(v, ".", 2)[0], " ", 2)[0])
	return n
}

// ms is d as a server setting in milliseconds.
func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// schemaReady creates the schema on c if this Locker has not seen it yet.
func (l *Locker) schemaReady(ctx context.Context, c *pgx.Conn) error {
	l.schemaMu.Lock()
	defer l.schemaMu.Unlock()
	if l.schemaOK {
		return nil
	}
	if err := l.ensureSchema(ctx, c); err != nil {
		return err
	}
	l.schemaOK = true
	return nil
}

// lazyConn is a connection of the Locker's, opened on first use and
// again after a failure.
type lazyConn struct {
	mu sync.Mutex
	c  *pgx.Conn
}

// withAdmin runs f on the Locker's connection for reads (Query, Watch)
// and the bus's notifications.
func (l *Locker) withAdmin(ctx context.Context, f func(*pgx.Conn) error) error {
	return l.withConn(ctx, &l.admin, "query", f)
}

// withEnds runs f on the Locker's connection for ending sessions, apart
// from the reads, so that an end never waits behind them (a waiter that
// ends a dead holder's term while its Watch reads the change).
func (l *Locker) withEnds(ctx context.Context, f func(*pgx.Conn) error) error {
	return l.withConn(ctx, &l.ends, "end", f)
}

// withConn runs f on lc, opened (as what) if it is not.
func (l *Locker) withConn(ctx context.Context, lc *lazyConn, what string, f func(*pgx.Conn) error) error {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.c == nil || lc.c.IsClosed() {
		c, err := l.connect(ctx, what, map[string]string{"statement_timeout": ms(10 * time.Second), "lock_timeout": ms(5 * time.Second)})
		if err != nil {
			return err
		}
		if err := l.schemaReady(ctx, c); err != nil {
			c.Close(context.Background())
			return err
		}
		lc.c = c
	}
	err := f(lc.c)
	if err != nil && (lc.c.IsClosed() || ctx.Err() != nil) {
		lc.c.Close(context.Background())
		lc.c = nil
	}
	return err
}

// close closes lc.
func (lc *lazyConn) close() {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.c != nil {
		lc.c.Close(context.Background())
		lc.c = nil
	}
}

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

func (l *Locker) nextKey() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keyseq++
	return strconv.FormatUint(l.keyseq, 10)
}

func (l *Locker) track(t *holding) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return elect.ErrClosed
	}
	l.terms[t.lead] = t
	return nil
}

// untrack forgets a released term; the last term of an ended session to
// go ends its lease (see session.end).
func (l *Locker) untrack(t *holding) {
	l.mu.Lock()
	delete(l.terms, t.lead)
	l.mu.Unlock()
	l.endIfIdle(t.s)
}

func (l *Locker) held(s *session) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range l.terms {
		if t.s == s {
			return true
		}
	}
	return false
}

// endIfIdle removes the lease of an ended session once none of its terms
// is held any more, so that others need not wait for it to expire.
func (l *Locker) endIfIdle(s *session) {
	select {
	case <-s.done:
	default:
		return
	}
	if !l.held(s) {
		s.revoke()
	}
}

// Session returns the id of the session lead's term is in, so that
// another process (leaderrun's watchdog) can end the term with
// EndSession once the holder has died or stopped renewing it. Ending it
// ends every term and request of this Locker's session.
func (l *Locker) Session(lead *elect.Leadership) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.terms[lead]
	if !ok || lead.Err() != nil {
		return 0, fmt.Errorf("pg: the leadership of %s is not a live term of this Locker", lead.Name())
	}
	return t.s.id, nil
}

// EndSession removes session id and all its requests and terms, at once:
// what the expiry of its lease would do TTL after its last renewal. For
// a process that knows the holder is gone (leaderrun's watchdog), and for
// a steal's KillAfter.
func (l *Locker) EndSession(ctx context.Context, id int64) error {
	// The session exists, so does the schema: no check on the way (a
	// watchdog's Locker makes this its only call, on a new connection).
	l.schemaMu.Lock()
	l.schemaOK = true
	l.schemaMu.Unlock()
	return l.withEnds(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, l.endSessionSQL(), id)
		return err
	})
}

// Close ends every request still waiting (they return elect.ErrClosed),
// releases every leadership granted by l, ends the session and closes
// its connections. It is idempotent.
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
		s.revoke()
	}
	if l.lis != nil {
		l.lis.close()
	}
	l.watchMu.Lock()
	for _, w := range l.watchers {
		w.stop()
	}
	spare := l.spare
	l.spare = nil
	l.watchMu.Unlock()
	if spare != nil {
		spare.Close(context.Background())
	}
	l.admin.close()
	l.ends.close()
	return errors.Join(errs...)
}

// TryAcquire asks once for name in mode and never waits. It returns ok
// false and no error when the lock is held or others are queued.
func (l *Locker) TryAcquire(ctx context.Context, name string, mode elect.Mode) (*elect.Leadership, bool, error) {
	return remote.TryAcquire(ctx, l, name, mode)
}

var _ elect.Backend = (*Locker)(nil)

// Ping connects, creates the schema if it is missing, and reads it: the
// first round trip, which tells a wrong address, a refused login, a TLS
// failure or missing privileges at once.
//
// It also looks for a transaction-mode pooler: a connection whose
// successive transactions run on different server backends. (A pooler
// that happens to keep one backend passes here; the session's own checks
// refuse it once it moves one, see ErrPooler.)
func (l *Locker) Ping(ctx context.Context) error {
	return l.withAdmin(ctx, func(c *pgx.Conn) error {
		if _, err := c.Exec(ctx, "SELECT count(*) FROM "+l.q+".sessions"); err != nil {
			return err
		}
		var a, b uint32
		if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&a); err != nil {
			return err
		}
		if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&b); err != nil {
			return err
		}
		if a != b {
			return fmt.Errorf("%w (backends %d then %d)", ErrPooler, a, b)
		}
		return nil
	})
}
