package elect

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/leaderrun/leaderrun/oslock"
)

// depose ends the terms of the current holders: a stealer at the head of
// the line (no steal ahead of it) writes a notice into each granted
// ticket's inbox. The holders' terms end with ErrStolen, but they keep the
// kernel lock until they release it, and their tickets stay, so Query
// still shows them as the holders they are. Nobody is deposed before the
// stealer is next in line, so a steal that waits behind another deposes
// nothing.
func (a *acquirer) depose(queue []entry) {
	for _, e := range queue {
		if e.name == a.tk.e.name || a.deposed[e.name] {
			continue
		}
		r, err := readRecord(a.q, e.name)
		if err != nil || r.Epoch == 0 {
			continue
		}
		if err := a.q.SignalBeacon(e.name+inboxSuffix, stealNotice(r.Epoch, a.tk.e.name)); err == nil {
			a.pids[e.name] = r.PID
			if a.deposed == nil {
				a.deposed = map[string]bool{}
			}
			a.deposed[e.name] = true
		}
	}
}

// killHolders sends SIGKILL to the deposed holders that still hold the
// lock file. Where /proc/locks is missing, liveness of the pid stands in
// for holding the lock. A holder of another user (a group-shared
// directory) cannot be killed: that ends the steal with ErrForeignHolder
// naming it, rather than a wait for a release that may never come.
func (a *acquirer) killHolders() error {
	var table map[oslock.FileID][]oslock.LockHolder
	var id oslock.FileID
	known := false
	if a.lockF != nil {
		if i, err := oslock.IDOf(a.lockF); err == nil {
			if t, err := oslock.LockTable(); err == nil {
				table, id, known = t, i, true
			}
		}
	}
	for name := range a.deposed {
		pid := a.pids[name]
		if pid == os.Getpid() || pid <= 0 {
			continue
		}
		// Still in the way: it holds our lock file, or (a lock file
		// replaced since) its granted ticket is still there. A ticket
		// that is there but no longer granted is a waiter: one that
		// wrote its grant, saw our ticket and stepped back (deposed in
		// between), which is never killed.
		if alive, err := probe(a.q, entry{name: name}); err != nil || !alive || !a.granted(name) {
			if !known || !holds(table[id], pid) {
				continue
			}
		}
		if err := killable(pid, "did not let go within KillAfter", "release the lock"); err != nil {
			return err
		}
		oslock.Kill(pid)
	}
	return nil
}

// granted reports whether the ticket name's record says it holds a grant.
func (a *acquirer) granted(name string) bool {
	r, err := readRecord(a.q, name)
	return err == nil && r.Epoch != 0
}

// stealNotice is what a stealer, whose ticket is named by, writes into
// the inbox of the holder of epoch (see holding.deposedBy): "S<epoch>
// <ticket>". The holder acts on it only while that ticket is alive, so a
// stealer that dies or gives up before the holder reads it deposes
// nobody.
func stealNotice(epoch uint64, by string) []byte {
	return []byte("S" + strconv.FormatUint(epoch, 10) + " " + by + "\n")
}

// killable returns ErrForeignHolder, naming pid and its uid, when this
// process may not kill pid (another user's, and we are not root); why says
// what pid did, and fix what it must do instead.
func killable(pid int, why, fix string) error {
	uid, me := oslock.UIDOf(pid), os.Geteuid()
	if uid < 0 || uid == me || me == 0 {
		return nil
	}
	return fmt.Errorf("%w: holder pid %d of uid %d %s, and uid %d may not kill it; it must %s, or uid %d or root must end it",
		ErrForeignHolder, pid, uid, why, me, fix, uid)
}

func holds(hs []oslock.LockHolder, pid int) bool {
	for _, h := range hs {
		if h.PID == pid {
			return true
		}
	}
	return false
}

// The steal marker (see layout.go) exists while a steal may be queued.
// Waiters that see no marker know that the tickets ahead of them can only
// go, and skip listing the queue at a handoff (see aheadNow). A stealer
// makes it before it publishes its ticket and removes it when it leaves,
// unless another steal is queued; one left by a killed stealer only costs
// listings until Prune removes it.
func markSteal(q *oslock.Dir) error {
	f, err := q.OpenFile(stealMarker, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

func stealsMaybe(q *oslock.Dir) bool {
	_, _, err := q.Lstat(stealMarker)
	return err == nil
}

// unmarkSteal removes the marker when no live steal ticket is left. It
// runs under the state file's lock, as a stealer's marking and publishing
// do, so a steal joining meanwhile is either seen or marks anew.
func unmarkSteal(d *oslock.Dir, name string, q *oslock.Dir) {
	withState(context.Background(), d, name, func(*state) error {
		queue, err := listQueue(q)
		if err != nil {
			return err
		}
		for _, e := range queue {
			if e.steal {
				if alive, err := probe(q, e); err != nil || alive {
					return nil
				}
			}
		}
		q.Remove(stealMarker)
		return nil
	}, nil)
}
