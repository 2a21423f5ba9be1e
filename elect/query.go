package elect

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"github.com/leaderrun/leaderrun/oslock"
)

// Snapshot is what Query saw at one moment, in the shape of the Web Locks
// navigator.locks.query(): granted requests and waiting ones, the latter in
// queue order. It describes the past by the time it is returned: show it,
// never decide on it.
type Snapshot struct {
	Held    []Holder  `json:"held"`
	Pending []Pending `json:"pending"`
}

// Holder is a granted request.
type Holder struct {
	Name  string `json:"name"`
	Mode  Mode   `json:"mode"`
	PID   int    `json:"pid"`
	Epoch uint64 `json:"epoch"`
	// Since is when the term began; unknown, zero and left out of JSON,
	// for an External holder.
	Since   time.Time `json:"since,omitzero"`
	Command []string  `json:"command"`
	// State is "running", "stopped" (SIGSTOP or a debugger: it still
	// holds the lock), or "unknown" where the platform cannot tell.
	State string `json:"state"`
	// External is set for a holder that is not a leaderrun client, such
	// as flock(1) on the lock file; its Epoch is 0.
	External bool `json:"external,omitempty"`
	// Labels are the holder's Request.Labels.
	Labels []string `json:"labels,omitempty"`
	// Host is the holder's host, for a backend that spans hosts (etcd);
	// empty for the flock backend, whose holders are all on this one.
	Host string `json:"host,omitempty"`
}

// Pending is a queued request.
type Pending struct {
	Name    string    `json:"name"`
	Mode    Mode      `json:"mode"`
	PID     int       `json:"pid"`
	Ticket  uint64    `json:"ticket"`
	Since   time.Time `json:"since"`
	Command []string  `json:"command"`
	State   string    `json:"state"`
	// Steal is set for a stealing request, which goes ahead of the rest.
	Steal bool `json:"steal,omitempty"`
	// Polling is set while the request waits by the fallback poll (1ms
	// to 100ms): nothing could be slept on, such as a lock holder that
	// /proc/locks does not show.
	Polling bool `json:"polling,omitempty"`
	// Labels are the request's Request.Labels.
	Labels []string `json:"labels,omitempty"`
	// Host is the requester's host, as for Holder.
	Host string `json:"host,omitempty"`
}

// Query returns a snapshot of the holders and the queue of name. It takes
// no lock and wakes nobody: liveness comes from /proc/locks on Linux (from
// signal 0 elsewhere), and tickets are read, never locked.
func (l *Locker) Query(ctx context.Context, name string) (Snapshot, error) {
	if err := ValidateName(name); err != nil {
		return Snapshot{}, err
	}
	snap := Snapshot{Held: []Holder{}, Pending: []Pending{}}
	if l.alone {
		return snap, nil
	}
	table, terr := lockTable()
	if err := l.query(ctx, name, table, usable(table, terr), &snap); err != nil {
		return Snapshot{}, err
	}
	return snap, nil
}

// QueryAll is Query for every name in the directory.
func (l *Locker) QueryAll(ctx context.Context) (Snapshot, error) {
	snap := Snapshot{Held: []Holder{}, Pending: []Pending{}}
	names, err := l.Names()
	if err != nil {
		return snap, err
	}
	table, terr := lockTable()
	for _, n := range names {
		if err := l.query(ctx, n, table, usable(table, terr), &snap); err != nil {
			return snap, err
		}
	}
	return snap, nil
}

// lockTable reads /proc/locks; tests replace it.
var lockTable = oslock.LockTable

// usable reports whether /proc/locks can be trusted for liveness: some
// sandboxes show it present but empty, which would make every holder look
// dead. An empty table is not trusted; liveness then comes from the pids.
func usable(table map[oslock.FileID][]oslock.LockHolder, err error) bool {
	return err == nil && len(table) > 0
}

func (l *Locker) query(ctx context.Context, name string, table map[oslock.FileID][]oslock.LockHolder, haveTable bool, snap *Snapshot) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d, err := l.current()
	if err != nil {
		return err
	}
	q, err := d.Sub(name+queueSuffix, false, oslock.DirOptions{GroupShared: l.group})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	granted := map[int]bool{}
	if q != nil {
		defer q.Close()
		var fresh map[oslock.FileID][]oslock.LockHolder
		live := func(id oslock.FileID, pid int) bool {
			if !haveTable {
				return oslock.StateOf(pid) != oslock.ProcGone
			}
			if len(table[id]) > 0 {
				return true
			}
			// The kernel gives /proc/locks a page per read, and an
			// entry is skipped when locks ahead of it go between two
			// reads: a live ticket missing from the table is looked
			// for in a second reading before it is called dead.
			if fresh == nil {
				if fresh, _ = lockTable(); fresh == nil {
					fresh = map[oslock.FileID][]oslock.LockHolder{}
				}
			}
			return len(fresh[id]) > 0
		}
		if err := queryQueue(q, name, live, granted, snap); err != nil {
			return err
		}
	}
	if haveTable {
		queryOutsiders(d, name, table, granted, snap)
	}
	return nil
}

// queryQueue adds the live tickets of the queue q to snap: the granted
// ones (their pids noted in granted) as holders, the others as pending.
func queryQueue(q *oslock.Dir, name string, live func(oslock.FileID, int) bool, granted map[int]bool, snap *Snapshot) error {
	queue, err := listQueue(q)
	if err != nil {
		return err
	}
	for _, e := range queue {
		id, _, err := q.Lstat(e.name)
		if err != nil {
			continue // gone since the listing
		}
		r, err := readRecord(q, e.name)
		if err != nil || !live(id, r.PID) {
			continue // not ours, or its owner is dead
		}
		state := oslock.StateOf(r.PID).String()
		if r.Epoch != 0 {
			granted[r.PID] = true
			snap.Held = append(snap.Held, Holder{Name: name, Mode: r.Mode, PID: r.PID, Epoch: r.Epoch, Since: r.Granted, Command: r.Command, State: state, Labels: r.Labels})
			continue
		}
		snap.Pending = append(snap.Pending, Pending{Name: name, Mode: r.Mode, PID: r.PID, Ticket: e.seq, Since: r.Since, Command: r.Command, State: state, Steal: e.steal, Polling: r.Polling, Labels: r.Labels})
	}
	return nil
}

// queryOutsiders adds the holders of the lock file without a granted
// ticket: flock(1) and other outside users of the documented lock file,
// or holders whose term was stolen and who have not let go yet.
func queryOutsiders(d *oslock.Dir, name string, table map[oslock.FileID][]oslock.LockHolder, granted map[int]bool, snap *Snapshot) {
	id, _, err := d.Lstat(name + lockSuffix)
	if err != nil {
		return
	}
	for _, h := range table[id] {
		if granted[h.PID] {
			continue
		}
		mode := Shared
		if h.Exclusive {
			mode = Exclusive
		}
		snap.Held = append(snap.Held, Holder{Name: name, Mode: mode, PID: h.PID, Command: oslock.Cmdline(h.PID), State: oslock.StateOf(h.PID).String(), External: true})
	}
}

// Prune removes what dead processes left in name's queue: tickets and
// half-made temporary files. Waiters remove dead tickets they meet on their
// own; Prune is for tidying up after the last contender died.
func (l *Locker) Prune(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if l.alone {
		return nil
	}
	d, err := l.current()
	if err != nil {
		return err
	}
	q, err := d.Sub(name+queueSuffix, false, oslock.DirOptions{GroupShared: l.group})
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	defer q.Close()
	return prune(ctx, d, name, q)
}
