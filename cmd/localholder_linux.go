package cmd

import (
	"context"

	"github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/oslock"
)

// watchLocalHolder runs while this instance waits in line, for a backend
// that carries its own bus and can end a dead holder's term (etcd): it
// follows the leader of name, and while the leader is a leaderrun of lk's
// lock directory (its term marker is in lk.Dir()) it sleeps on the leader's
// pidfd. When that leaderrun dies without ending its term (its marker is
// still there), it fences the term as the next holder would, then ends
// the term in the backend. Until ctx ends.
func watchLocalHolder(ctx context.Context, lk Backend, name string) {
	he, ok := lk.(HolderEnder)
	b, own := lk.(BusBackend)
	if !ok || !own {
		return
	}
	endWait := func() {}
	defer func() { endWait() }()
	onEvents(ctx, b, name, BusOptions{WaitForLeader: true, PublishOnly: true}, func(ev bus.Event) {
		if ev.Kind != bus.EventLeader {
			return
		}
		endWait() // a new leader: the last one's wait is over
		wctx, cancel := context.WithCancel(ctx)
		endWait = cancel
		go outliveLocalHolder(wctx, he, lk.Dir(), name, ev.Leader)
	})
}

// outliveLocalHolder waits for the death of l, if it is a leaderrun of
// this lock directory, and then ends its term if it did not.
func outliveLocalHolder(ctx context.Context, he HolderEnder, dir, name string, l bus.Leader) {
	d, err := oslock.OpenDir(dir, oslock.DirOptions{GroupShared: true, AllowUnsafeFS: true})
	if err != nil {
		return
	}
	defer d.Close()
	file, r := markerOf(d, name, l.PID)
	if r == nil || foreignPids(r) {
		return // not a leaderrun of this directory
	}
	pidfd, err := oslock.OpenPidfd(r.wpid)
	if err != nil {
		return
	}
	defer pidfd.Close()
	if !wrapperAlive(r) {
		return // a recycled pid, or a term already over
	}
	if oslock.WaitPidfd(ctx, pidfd) != nil {
		return // ctx ended: another leader, or this one's turn
	}
	// A leaderrun that ends its term cleanly removes its marker before it
	// lets go of the lock; one that died left it, and maybe COMMAND.
	if r, err = readMarker(d, file); err != nil {
		return
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*fenceBudget)
	defer cancel()
	if !fenceTerm(fctx, r) {
		return // COMMAND may still run: its lease must expire first
	}
	// The term ends before its marker goes, as in the watchdog: killed
	// in between, this leaves the marker for the other waiters here.
	if he.EndHolder(fctx, name, elect.Holder{Name: name, PID: l.PID, Host: l.Host, Epoch: l.Epoch}) != nil {
		return
	}
	stopHalfway()
	d.Remove(file)
}

// markerOf finds the term marker of name whose leaderrun is pid.
func markerOf(d *oslock.Dir, name string, pid int) (string, *termRecord) {
	names, err := d.Names()
	if err != nil || pid < 2 {
		return "", nil
	}
	for _, file := range names {
		if markerID(file, name) == "" {
			continue
		}
		if r, err := readMarker(d, file); err == nil && r.wpid == pid {
			return file, r
		}
	}
	return "", nil
}
