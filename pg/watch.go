package pg

import (
	"context"
	"encoding/json"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/elect"
)

// Watch is Query made event-driven: it sends a snapshot of name's holders
// and queue at once, then a new one after every change, until ctx ends;
// the channel is then closed. A reader that falls behind gets the latest
// snapshot, never a backlog. Closing the Locker ends it too.
//
// It wakes on the server's word, not by polling: a NOTIFY on the name's
// channel, which every request, grant and removal of the name sends (on a
// connection of the watch's own, LISTENing), and, for a holder whose
// connection ends without a word (its process or host died), the end of
// that connection and then the expiry of its lease, as a waiter does.
func (l *Locker) Watch(ctx context.Context, name string) (<-chan elect.Snapshot, error) {
	return l.watchAlso(ctx, name, "", nil)
}

// watchAlso is Watch, with the notifications of channel also (a bus's),
// read on the same connection, decoded into bus: a bus member needs one
// connection for both.
func (l *Locker) watchAlso(ctx context.Context, name, also string, bus chan<- busMsg) (<-chan elect.Snapshot, error) {
	if err := elect.ValidateName(name); err != nil {
		return nil, err
	}
	ctx, end, err := l.begin(ctx)
	if err != nil {
		return nil, err
	}
	c, err := l.connect(ctx, "watch", map[string]string{"statement_timeout": "10000"})
	var wch string
	if err == nil {
		err = l.schemaReady(ctx, c)
		if err == nil {
			if err = c.QueryRow(ctx, "SELECT "+l.q+".watch_chan($1)", name).Scan(&wch); err == nil {
				_, err = c.Exec(ctx, "LISTEN "+pgx.Identifier{wch}.Sanitize())
			}
		}
		if err == nil && also != "" {
			_, err = c.Exec(ctx, "LISTEN "+pgx.Identifier{also}.Sanitize())
		}
		if err != nil {
			c.Close(context.Background())
		}
	}
	if err != nil {
		end()
		return nil, l.pgErr("watching "+name, err)
	}
	// Listening before the first snapshot: a change in between is told.
	first, err := l.Query(ctx, name)
	if err != nil {
		c.Close(context.Background())
		end()
		return nil, err
	}
	out := make(chan elect.Snapshot, 1)
	out <- first
	go l.watch(ctx, end, c, wch, bus, name, first, out)
	return out, nil
}

func (l *Locker) watch(ctx context.Context, end func(), c *pgx.Conn, wch string, bus chan<- busMsg, name string, last elect.Snapshot, out chan elect.Snapshot) {
	defer end()
	defer close(out)
	notes := make(chan struct{}, 1)
	lost := make(chan struct{})
	go forwardNotes(ctx, c, wch, bus, notes, lost)
	woke, stop := l.watchHolders(ctx, name, last)
	defer func() { stop() }()
	for {
		select {
		case <-ctx.Done():
		case <-lost:
		case <-notes:
		case <-woke:
		}
		select {
		case <-ctx.Done():
			return
		case <-lost:
			return // the server went: the watch ends, as the Locker's requests do
		default:
		}
		if snap, err := l.Query(ctx, name); err == nil && !reflect.DeepEqual(snap, last) {
			last = snap
			latest(out, snap)
		}
		// The new watches first, then the old ones stop: a holder still
		// there keeps its connection's watch (shared, counted) instead of
		// a new connection to the server at every change of the name.
		nextWoke, nextStop := l.watchHolders(ctx, name, last)
		stop()
		woke, stop = nextWoke, nextStop
	}
}

// forwardNotes reads c's notifications until it fails (then closes lost
// and c): one of the name's channel wch becomes a token in notes, and
// any other, when bus is set, a bus message.
func forwardNotes(ctx context.Context, c *pgx.Conn, wch string, bus chan<- busMsg, notes chan<- struct{}, lost chan<- struct{}) {
	defer close(lost)
	defer c.Close(context.Background())
	for {
		n, err := c.WaitForNotification(ctx)
		if err != nil {
			return
		}
		if n.Channel != wch {
			var m busMsg
			if bus == nil || json.Unmarshal([]byte(n.Payload), &m) != nil {
				continue
			}
			select {
			case bus <- m:
			case <-ctx.Done():
				return
			}
			continue
		}
		select {
		case notes <- struct{}{}:
		default:
		}
	}
}

// watchHolders returns a channel that receives when one of last's
// holders ends without a row's change: its connection goes, or, for one
// whose connection is already gone, its lease expires by the server's
// clock; and the function that stops watching.
func (l *Locker) watchHolders(ctx context.Context, name string, last elect.Snapshot) (<-chan struct{}, func()) {
	var unwatch []func()
	var gone []<-chan struct{}
	var next time.Duration = -1
	l.mu.Lock()
	var own int64
	var ownDone <-chan struct{}
	if l.sess != nil {
		own, ownDone = l.sess.id, l.sess.done
	}
	l.mu.Unlock()
	for _, h := range last.Held {
		sid, live, left, err := l.holderSession(ctx, name, h.Epoch)
		switch {
		case err != nil || sid == 0:
		case sid == own && live:
			// This Locker's own session: the end of its connection is
			// known here (the session ends), with no connection of its
			// own to the server to sleep on.
			gone = append(gone, ownDone)
		case live:
			g, stop := l.watchDeath(sid)
			gone, unwatch = append(gone, g), append(unwatch, stop)
		case next < 0 || left < next:
			next = left
		}
	}
	woke := make(chan struct{}, 1)
	wake := func() {
		select {
		case woke <- struct{}{}:
		default:
		}
	}
	if next >= 0 {
		t := time.AfterFunc(next+5*time.Millisecond, wake)
		unwatch = append(unwatch, func() { t.Stop() })
	}
	for _, g := range gone {
		go func() {
			select {
			case <-g:
				wake()
			case <-ctx.Done():
			}
		}()
	}
	return woke, func() {
		for _, u := range unwatch {
			u()
		}
	}
}

// holderSession is the session of name's holder of epoch: its id, whether
// its connection lives, and how long its lease has left by the server's
// clock.
func (l *Locker) holderSession(ctx context.Context, name string, epoch uint64) (int64, bool, time.Duration, error) {
	var sid int64
	var gone bool
	var left float64
	err := l.withAdmin(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, "SELECT r.session_id, "+l.q+".conn_gone(r.session_id), extract(epoch FROM s.expires_at - clock_timestamp())::float8 FROM "+
			l.q+".requests r JOIN "+l.q+".sessions s ON s.id = r.session_id WHERE r.name = $1 AND r.epoch = $2", name, int64(epoch)).Scan(&sid, &gone, &left)
	})
	if err == pgx.ErrNoRows {
		return 0, false, 0, nil
	}
	return sid, !gone, max(0, time.Duration(left*float64(time.Second))), err
}

// latest puts snap in ch, replacing a snapshot the reader has not taken.
func latest(ch chan elect.Snapshot, snap elect.Snapshot) {
	for {
		select {
		case ch <- snap:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}
