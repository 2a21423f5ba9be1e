package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/elect"
)

// holding is a granted request and the monitor that ends its term when a
// steal comes, when its row is removed by someone else, or when the
// session ends.
type holding struct {
	l      *Locker
	s      *session
	lead   *elect.Leadership
	end    func(error)
	name   string
	ticket int64
	steal  bool

	msgs  <-chan string
	unsub func()
	stop  context.CancelFunc
	done  chan struct{}
}

func (a *acquirer) hold(v verdict) (*elect.Leadership, error) {
	t := &holding{l: a.l, s: a.s, name: a.name, ticket: a.ticket, steal: a.req.Steal, msgs: a.msgs, unsub: a.unsub}
	since := time.Now()
	if v.granted != nil {
		since = *v.granted
	}
	var epoch uint64
	if v.epoch != nil {
		epoch = uint64(*v.epoch)
	}
	lead, end := elect.NewLeadership(elect.Term{Name: a.name, Mode: a.req.Mode, Epoch: epoch, Since: since, Release: t.release, Deadline: a.s.Moves})
	t.lead, t.end = lead, end
	var ctx context.Context
	ctx, t.stop = context.WithCancel(context.Background())
	t.done = make(chan struct{})
	go t.monitor(ctx)
	a.ticket = 0 // the holding's now: cleanup leaves it
	if err := a.l.track(t); err != nil {
		lead.Release()
		return nil, err
	}
	return lead, nil
}

// monitor ends the term with elect.ErrStolen when a steal is queued (for a
// holder that is not itself a steal), with elect.ErrSessionLost when the
// term's row is removed or the session ends. A "resync" (the listener's
// connection failed, and notifications may be lost) checks the row.
func (t *holding) monitor(ctx context.Context) {
	defer close(t.done)
	stop := context.AfterFunc(t.s.ctx, func() { t.end(t.s.err) })
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case kind := <-t.msgs:
			switch kind {
			case "stolen":
				if !t.steal {
					t.end(elect.ErrStolen)
				}
			case "gone":
				t.end(fmt.Errorf("%w: the term's request %d of %s was removed (its session was ended by a steal's KillAfter or a watchdog, or by hand)", elect.ErrSessionLost, t.ticket, t.name))
			case resync:
				t.check()
			}
		}
	}
}

// check reads whether the term still stands, as the notifications would
// have told.
func (t *holding) check() {
	var st string
	err := t.s.do(func(c context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(c, "SELECT "+t.l.q+".check($1, $2)", t.ticket, t.s.id).Scan(&st)
	})
	switch {
	case err != nil:
		// The session's deadline decides.
	case st == "lost":
		t.end(fmt.Errorf("%w: the term's request %d of %s is gone", elect.ErrSessionLost, t.ticket, t.name))
	case st == "stolen" && !t.steal:
		t.end(elect.ErrStolen)
	}
}

// release removes the term's row, which wakes who may move next. When the
// server cannot be reached, the session is given up: its row goes with the
// lease.
func (t *holding) release() error {
	defer t.l.untrack(t)
	defer func() { t.stop(); <-t.done; t.unsub() }()
	select {
	case <-t.s.done:
		return nil // the session's end removes or expires the rows
	default:
	}
	err := t.s.do(func(c context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(c, t.l.leaveSQL(), t.ticket, t.s.id)
		return err
	})
	if err != nil {
		err = fmt.Errorf("pg: releasing %s: %w; the session is given up, so its rows go within the TTL", t.name, err)
		t.s.end(fmt.Errorf("%w: %w", elect.ErrSessionLost, err), true)
		return err
	}
	return nil
}
