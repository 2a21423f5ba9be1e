package elect

import (
	"os"

	"github.com/leaderrun/leaderrun/oslock"
)

// evict ends the terms of the current holders: it removes the names of the
// granted tickets ahead of the stealer. Their owners see the name go (and
// their leadership end with ErrStolen) but keep the kernel lock until they
// release it.
func (a *acquirer) evict(queue []entry) {
	for _, e := range queue {
		if e.name == a.tk.e.name {
			continue
		}
		if r, err := readRecord(a.q, e.name); err == nil && r.Epoch != 0 {
			a.q.Remove(e.name)
			a.evicted = append(a.evicted, r.PID)
		}
	}
}

// killHolders sends SIGKILL to the evicted holders that still hold the
// lock file, when they belong to the same user. Where /proc/locks is
// missing, liveness of the pid stands in for holding the lock.
func (a *acquirer) killHolders() {
	if a.lockF == nil {
		return
	}
	id, err := oslock.IDOf(a.lockF)
	if err != nil {
		return
	}
	table, terr := oslock.LockTable()
	for _, pid := range a.evicted {
		if pid == os.Getpid() || pid <= 0 {
			continue
		}
		if terr == nil && !holds(table[id], pid) {
			continue
		}
		if uid := oslock.UIDOf(pid); uid >= 0 && uid != os.Getuid() {
			continue
		}
		oslock.Kill(pid)
	}
}

func holds(hs []oslock.LockHolder, pid int) bool {
	for _, h := range hs {
		if h.PID == pid {
			return true
		}
	}
	return false
}
