package pg

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/elect"
)

// Query returns the holders and the queue of name, read in one statement:
// holders in the order they were granted, then waiting requests in queue
// order (steals first). It writes nothing and wakes nobody. Requests
// whose lease has expired are left out. A holder's State is "running"
// while its lease lives: whether its process runs, on another host,
// cannot be seen. Every holder and request has its Host.
func (l *Locker) Query(ctx context.Context, name string) (elect.Snapshot, error) {
	snap := elect.Snapshot{Held: []elect.Holder{}, Pending: []elect.Pending{}}
	if err := elect.ValidateName(name); err != nil {
		return snap, err
	}
	err := l.query(ctx, "r.name = $1", []any{name}, &snap)
	return snap, err
}

// QueryAll is Query for every name, in name order.
func (l *Locker) QueryAll(ctx context.Context) (elect.Snapshot, error) {
	snap := elect.Snapshot{Held: []elect.Holder{}, Pending: []elect.Pending{}}
	err := l.query(ctx, "true", nil, &snap)
	return snap, err
}

// Names lists the names that have holders or waiting requests.
func (l *Locker) Names(ctx context.Context) ([]string, error) {
	var names []string
	err := l.withAdmin(ctx, func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, "SELECT DISTINCT r.name FROM "+l.q+".requests r JOIN "+l.q+".sessions s ON s.id = r.session_id WHERE s.expires_at > clock_timestamp() ORDER BY 1")
		if err != nil {
			return err
		}
		names, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return names, l.pgErr("listing names", err)
}

func (l *Locker) query(ctx context.Context, where string, args []any, snap *elect.Snapshot) error {
	err := l.withAdmin(ctx, func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, `SELECT r.name, r.ticket, r.exclusive, r.steal, r.pid, r.host, r.command, r.labels, r.since, r.epoch, r.granted
			FROM `+l.q+`.requests r JOIN `+l.q+`.sessions s ON s.id = r.session_id
			WHERE s.expires_at > clock_timestamp() AND `+where+`
			ORDER BY r.name, r.epoch IS NULL, r.granted, NOT r.steal, r.ticket`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				name, host      string
				ticket          int64
				excl, steal     bool
				pid             int
				command, labels []string
				since           time.Time
				epoch           *int64
				granted         *time.Time
			)
			if err := rows.Scan(&name, &ticket, &excl, &steal, &pid, &host, &command, &labels, &since, &epoch, &granted); err != nil {
				return err
			}
			mode := elect.Shared
			if excl {
				mode = elect.Exclusive
			}
			if len(labels) == 0 {
				labels = nil
			}
			if epoch != nil {
				h := elect.Holder{Name: name, Mode: mode, PID: pid, Epoch: uint64(*epoch), Command: command, State: "running", Labels: labels, Host: host}
				if granted != nil {
					h.Since = *granted
				}
				snap.Held = append(snap.Held, h)
				continue
			}
			snap.Pending = append(snap.Pending, elect.Pending{Name: name, Mode: mode, PID: pid, Ticket: uint64(ticket), Since: since, Command: command,
				State: "running", Steal: steal, Labels: labels, Host: host})
		}
		return rows.Err()
	})
	return l.pgErr("reading the queue", err)
}

// EndHolder ends h's term of name at once, if it is still one (the same
// pid, host and epoch), by ending its session: for leaderrun waiting on
// the host of a holder whose leaderrun it saw die, once its COMMAND is
// gone.
func (l *Locker) EndHolder(ctx context.Context, name string, h elect.Holder) error {
	if err := elect.ValidateName(name); err != nil {
		return err
	}
	err := l.withEnds(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SELECT "+l.q+".end_session(session_id) FROM "+l.q+".requests WHERE name = $1 AND epoch = $2 AND pid = $3 AND host = $4",
			name, int64(h.Epoch), h.PID, h.Host)
		return err
	})
	return l.pgErr("ending a holder", err)
}
