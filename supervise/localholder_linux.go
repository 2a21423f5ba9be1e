package supervise

import (
	"context"

	"github.com/leaderrun/leaderrun/oslock"
)

// outliveHolder is OutliveHolder, on Linux.
func outliveHolder(ctx context.Context, dir, name string, pid int, end func(context.Context) error) {
	d, err := oslock.OpenDir(dir, oslock.DirOptions{GroupShared: true, AllowUnsafeFS: true})
	if err != nil {
		return
	}
	defer d.Close()
	file, r := markerOf(d, name, pid)
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
	if end(fctx) != nil {
		return
	}
	stopAt("halfway")
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
