package pg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leaderrun/leaderrun/elect"
)

// Acquire asks for the lock name as req says and returns the leadership
// once it is granted. Requests are granted strictly in ticket order
// (steals first), following the Web Locks rule for modes. When ctx ends
// first, the request is removed and Acquire returns the context's cause.
// With req.IfAvailable it never waits and returns elect.ErrBusy instead.
// When the session is lost, or the request is removed by someone else
// while it waits, it returns an error matching elect.ErrSessionLost and is
// never granted; when the server cannot be reached, one matching
// elect.ErrUnavailable. Either way the request holds no place in line any
// more. After Close it returns elect.ErrClosed.
func (l *Locker) Acquire(ctx context.Context, name string, req elect.Request) (*elect.Leadership, error) {
	if err := elect.ValidateName(name); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if req.Command == nil {
		req.Command = os.Args
	}
	ctx, done, err := l.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	for try := 0; ; try++ {
		s, err := l.session(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, unavailable(err)
		}
		lead, err := l.acquire(ctx, s, name, req)
		if errors.Is(err, errSessionGone) && try < 2 {
			continue // the session ended before the request was made: a new one
		}
		return lead, err
	}
}

// errSessionGone: the session ended before the request could be made.
var errSessionGone = errors.New("pg: the session ended before the request was made")

// unavailable marks a failure to reach the server with
// elect.ErrUnavailable: the request holds no place in line.
func unavailable(err error) error {
	if err == nil || errors.Is(err, elect.ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if isConnErr(err) {
		return fmt.Errorf("%w: %w", elect.ErrUnavailable, err)
	}
	return err
}

// verdict is what enqueue or evaluate said of a request.
type verdict struct {
	state       string
	epoch       *int64
	granted     *time.Time
	blocker     *int64
	blockerLive *bool
	waitS       *float64
}

// acquirer is one request on its way to the lock.
type acquirer struct {
	l    *Locker
	s    *session
	name string
	req  elect.Request
	key  string

	ticket  int64 // once made
	since   time.Time
	deposed bool
	killAt  time.Time
	killed  map[int64]bool

	// The watch of the blocker's connection, kept from one wait to the
	// next while the blocker stays (watchBlocker).
	watched int64
	died    <-chan struct{}
	unwatch func()

	msgs  <-chan string
	unsub func()
}

func (l *Locker) acquire(ctx context.Context, s *session, name string, req elect.Request) (*elect.Leadership, error) {
	sctx, unbind := s.bind(ctx)
	defer unbind()
	a := &acquirer{l: l, s: s, name: name, req: req, key: l.nextKey()}
	lis, err := l.listener(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	a.msgs, a.unsub = lis.sub(a.key)
	lead, err := a.run(sctx)
	if err != nil {
		a.unsub()
		a.cleanup()
		if sctx.Err() != nil {
			err = context.Cause(sctx)
		}
		if a.deposed && !errors.Is(err, elect.ErrBusy) {
			err = fmt.Errorf("%w: %w", elect.ErrStealAbandoned, err)
		}
		return nil, err
	}
	return lead, nil
}

func (a *acquirer) run(ctx context.Context) (*elect.Leadership, error) {
	defer a.endWatch()
	v, err := a.enqueue()
	if err != nil {
		return nil, err
	}
	// Made ahead, the first evaluate after a wake-up and the first leave
	// are one round trip on a backend that has made them before.
	a.s.warm()
	if v.state == "wait" {
		a.l.warmEnds()
	}
	if a.req.Steal && a.req.KillAfter > 0 {
		a.killAt = time.Now().Add(a.req.KillAfter)
	}
	for {
		switch v.state {
		case "granted":
			return a.hold(v)
		case "lost":
			return nil, fmt.Errorf("%w: request %d of %s was removed while it waited (its session ended, or someone removed it)", elect.ErrSessionLost, a.ticket, a.name)
		}
		msg, gone, err := a.wait(ctx, v)
		if err != nil {
			return nil, err
		}
		if g, ok := a.handed(msg); ok {
			v = g
			continue
		}
		if gone {
			if w, ok := a.lingering(*v.blocker); ok {
				v = w
				continue
			}
		}
		if v, err = a.reevaluate(); err != nil {
			return nil, err
		}
	}
}

// reevaluate is evaluate, except that a grant told with a notification
// while it runs is taken at once (unlessHanded). Any other notification
// meanwhile means that the verdict may be stale, and the request
// evaluates again.
func (a *acquirer) reevaluate() (verdict, error) {
	ticket := a.ticket
	for {
		v, stale, err := a.unlessHanded(func() (verdict, error) { return a.evaluate(ticket) })
		if err != nil || v.state != "wait" || !stale {
			return v, err
		}
	}
}

// unlessHanded runs f, a round trip on the session's connection, and
// returns its verdict, unless a grant is told with a notification
// meanwhile, which is taken at once: the end of a holder's connection
// wakes its successor (watchBlocker) a moment before the holder's
// watchdog ends the term and hands the name on, and the grant need not
// wait for the round trip. The statement left behind ends on its own; it
// changes nothing of a granted request. stale says that another
// notification came meanwhile, so f's verdict may be out of date.
func (a *acquirer) unlessHanded(f func() (verdict, error)) (v verdict, stale bool, err error) {
	type result struct {
		v   verdict
		err error
	}
	res := make(chan result, 1)
	go func() {
		v, err := f()
		res <- result{v, err}
	}()
	for {
		select {
		case r := <-res:
			return r.v, stale, r.err
		case msg := <-a.msgs:
			if g, ok := a.handed(msg); ok {
				return g, false, nil
			}
			stale = true
		}
	}
}

// lingering is what the request waits for once the connection of its
// blocker, session sid, has gone, if it can be told without an evaluate:
// when that connection is gone indeed (the watch also ends when it could
// not be made), sid has no waiting request of the name and its lease
// lives by the server's clock, only its terms block, and they hold until that lease
// expires (their holder may not know yet) or the session is ended (by
// the holder's watchdog, a steal's KillAfter), which tells this request.
// An evaluate would change nothing then, and would lock the name, so the
// watchdog's end, which comes in that very moment, would wait behind it:
// a read that locks nothing tells the lease's expiry instead (revision 1
// tables). A grant told meanwhile is taken (unlessHanded). Otherwise, or
// when anything else was told meanwhile, false: the request evaluates.
func (a *acquirer) lingering(sid int64) (verdict, bool) {
	v, stale, err := a.unlessHanded(func() (verdict, error) {
		var left float64
		err := a.s.do(func(c context.Context, conn *pgx.Conn) error {
			return conn.QueryRow(c, a.l.lingerSQL(), sid, a.name, a.l.schema).Scan(&left)
		})
		live := false
		return verdict{state: "wait", blocker: &sid, blockerLive: &live, waitS: &left}, err
	})
	if err != nil || stale {
		return verdict{}, false
	}
	return v, true
}

// handed reads a grant told with the notification (hand): "granted EPOCH
// MICROSECONDS", committed by the transaction that let go. It is taken
// only while the session's deadline has not passed: the server granted it
// while the session's lease lived, and the deadline comes margin before
// that lease can expire, so the term is as safe as one granted by
// evaluate. Anything else (a process stopped past its deadline since, a
// word it does not know) is asked of the server again.
func (a *acquirer) handed(msg string) (verdict, bool) {
	rest, ok := strings.CutPrefix(msg, "granted ")
	if !ok || !a.s.alive() {
		return verdict{}, false
	}
	es, us, _ := strings.Cut(rest, " ")
	epoch, err1 := strconv.ParseInt(es, 10, 64)
	micros, err2 := strconv.ParseInt(us, 10, 64)
	if err1 != nil || err2 != nil || epoch <= 0 {
		return verdict{}, false
	}
	granted := time.UnixMicro(micros)
	return verdict{state: "granted", epoch: &epoch, granted: &granted}, true
}

// enqueue makes the request and returns the server's first verdict of
// it; errSessionGone when the session ended before it could be made, and
// elect.ErrBusy for an IfAvailable request that would wait.
func (a *acquirer) enqueue() (verdict, error) {
	labels := a.req.Labels
	if labels == nil {
		labels = []string{}
	}
	var v verdict
	var deposed bool
	err := a.s.do(func(c context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(c, "SELECT ticket, state, epoch, granted, blocker, blocker_live, wait_s, deposed, since FROM "+a.l.q+
			".enqueue($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
			a.s.id, a.name, a.req.Mode == elect.Exclusive, a.req.Steal, a.req.IfAvailable, a.l.chname, a.key,
			os.Getpid(), a.l.host, os.Getuid(), a.req.Command, labels).
			Scan(&a.ticket, &v.state, &v.epoch, &v.granted, &v.blocker, &v.blockerLive, &v.waitS, &deposed, &a.since)
	})
	var pe *pgconn.PgError
	if err == nil && v.state == "nosession" || errors.As(err, &pe) && pe.Code == "23503" {
		a.ticket = 0
		a.s.end(fmt.Errorf("%w: session %d was ended by someone else or expired", elect.ErrSessionLost, a.s.id), true)
		return v, errSessionGone
	}
	if err != nil {
		if a.s.ctx.Err() != nil {
			return v, errSessionGone // its row, if made, went with the connection
		}
		return v, unavailable(a.l.pgErr("queueing", err))
	}
	if v.state == "busy" {
		a.ticket = 0
		return v, elect.ErrBusy
	}
	a.deposed = deposed
	return v, nil
}

// evaluate asks the server again whether the request can be granted.
func (a *acquirer) evaluate(ticket int64) (verdict, error) {
	var v verdict
	err := a.s.do(func(c context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(c, a.l.evaluateSQL(), ticket, a.s.id).
			Scan(&v.state, &v.epoch, &v.granted, &v.blocker, &v.blockerLive, &v.waitS)
	})
	if err != nil {
		if a.s.ctx.Err() != nil {
			return v, context.Cause(a.s.ctx)
		}
		return v, unavailable(a.l.pgErr("waiting", err))
	}
	return v, nil
}

// wait sleeps until something may have changed for a waiting request: a
// notification addressed to it (returned: a grant told with it is taken
// as is), the end of its blocker's connection (gone), the expiry of its
// blocker's lease once that connection is gone, or a steal's KillAfter.
// It polls nothing: each of these is one wake-up.
func (a *acquirer) wait(ctx context.Context, v verdict) (msg string, gone bool, err error) {
	blocker := int64(0)
	if v.blocker != nil {
		blocker = *v.blocker
	}
	died, timer, stop := a.watchBlocker(blocker, v)
	defer stop()
	var kill <-chan time.Time
	if !a.killAt.IsZero() && blocker != 0 && blocker != a.s.id && !a.killed[blocker] {
		d := time.Until(a.killAt)
		if d <= 0 {
			a.kill(blocker)
			return "", false, nil
		}
		t := time.NewTimer(d)
		defer t.Stop()
		kill = t.C
	}
	select {
	case <-ctx.Done():
		return "", false, context.Cause(ctx)
	case msg := <-a.msgs:
		return msg, false, nil
	case <-died:
		a.endWatch() // over: a later wait on the same blocker watches anew
		return "", true, nil
	case <-timer:
	case <-kill:
		a.kill(blocker)
	}
	return "", false, nil
}

// watchBlocker returns what tells of the end of the blocking session: a
// channel closed when its connection goes, if it lives, or else the
// expiry of its lease by the server's clock; and the function that stops
// watching. Nothing for no blocker, or one of the request's own session.
//
// The watch of a live blocker's connection outlives the wait: it is kept
// while the blocker stays the same, so that a notification that changes
// nothing of it (a wake this request's own evaluate caused) does not
// close that watch's connection, whose statement sleeps on the lock, and
// open another; it ends with the request (endWatch).
func (a *acquirer) watchBlocker(blocker int64, v verdict) (<-chan struct{}, <-chan time.Time, func()) {
	live := v.blockerLive != nil && *v.blockerLive && blocker != 0 && blocker != a.s.id
	if a.unwatch != nil && (!live || blocker != a.watched) {
		a.endWatch()
	}
	switch {
	case blocker == 0 || blocker == a.s.id:
	case live:
		if a.unwatch == nil {
			a.died, a.unwatch = a.l.watchDeath(blocker)
			a.watched = blocker
		}
		return a.died, nil, func() {}
	case v.waitS != nil:
		// Its connection is gone: the lease expires by the server's
		// clock in this long. A little later, so that the server agrees
		// it has.
		t := time.NewTimer(time.Duration(*v.waitS*float64(time.Second)) + 5*time.Millisecond)
		return nil, t.C, func() { t.Stop() }
	}
	return nil, nil, func() {}
}

// endWatch ends the watch of the blocker's connection, if any.
func (a *acquirer) endWatch() {
	if a.unwatch != nil {
		a.unwatch()
		a.unwatch, a.died, a.watched = nil, nil, 0
	}
}

// kill ends the session of a holder that did not let go within the
// steal's KillAfter: its process, on another host perhaps, is not
// signalled; its terms end as their rows go.
func (a *acquirer) kill(sid int64) {
	if a.killed == nil {
		a.killed = map[int64]bool{}
	}
	a.killed[sid] = true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a.l.EndSession(ctx, sid)
}

// cleanup removes the request, on the session's connection. If that
// fails, the connection is gone, and a waiting request of a session whose
// connection is gone is passed by everyone at once.
func (a *acquirer) cleanup() {
	if a.ticket == 0 {
		return
	}
	err := a.s.do(func(c context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(c, a.l.leaveSQL(), a.ticket, a.s.id)
		return err
	})
	if err != nil {
		// The row may stay while the connection lives: give the session
		// up, so that it goes now or with the lease.
		a.s.end(fmt.Errorf("%w: could not remove request %d: %w", elect.ErrSessionLost, a.ticket, err), true)
	}
}
