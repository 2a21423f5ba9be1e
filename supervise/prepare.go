package supervise

import (
	"context"
	"os"
	"sync"

	"github.com/leaderrun/leaderrun/oslock"
)

// Prepared is what a supervisor makes of its next term while it waits in
// line: the term's id and, where COMMAND runs in a cgroup of its own (see
// the package doc), that cgroup. Begin a term with it, and the window
// between the grant and COMMAND's start holds only the fence, the marker
// and the fork (BenchmarkStart: about 95 µs less than making the cgroup
// at the grant, of some 700). A process forked ahead and exec'd at the
// grant was measured too, and was no faster than a fork into a cgroup
// made ahead: Go forks with CLONE_VFORK, which copies no page tables.
//
// A cgroup made ahead is locked (flock) by its supervisor for as long as
// it is the supervisor's; one left by a supervisor killed while it waited
// (empty, unlocked) is removed by a later Prepare in the same cgroup.
//
// With a watchdog, Prepare also starts the term's watchdog (see the
// package doc), which waits, idle, until the term begins and hands it the
// name's claim: a term then starts no process besides COMMAND, and the
// watchdog is up, and holds the claim, before COMMAND starts. An idle
// watchdog sleeps in recvmsg(2) and takes about 0.7 MB of memory of its
// own (4.7 MB resident, most of it this program's text, shared); it exits
// when the request is given up (Close) or its supervisor dies waiting.
type Prepared struct {
	id     string
	cg     *termCgroup
	wd     *watchdog
	marker *os.File // the term marker's inode, made unnamed (oslock.Dir.CreateUnnamed)
	once   sync.Once
	taken  bool // by a term, which owns the cgroup and the watchdog from then on
}

// Prepare prepares a term, with its watchdog if withWatchdog is true (for a
// term of a lock directory: a backend that ends its terms itself, etcd's,
// starts a watchdog of its own role). It never fails: where no cgroup can
// be made, the term has its id only, and where no watchdog can be
// started, the term starts one as it begins. On Linux it also starts, on
// a goroutine of its own, the check the Go runtime makes once before a
// first fork (that pidfds work, with a probe child), so that it is not
// made on the way to COMMAND.
//
// Given the lock directory dir (or ""), it also makes the inode of the
// term's marker there, without a name, which the term names at its
// start: allocating an inode is the dear part of making a file (on ext4
// without a journal, as the benchmark machine's /, it looks past every
// inode freed in the last minutes, which a chain of instances frees by
// the thousand: 2,000 of a chain's 5,400 samples of a wrapper were that
// one create), and an inode never named vanishes with its waiter.
func Prepare(dir string, withWatchdog bool) *Prepared {
	go warmSpawn()
	own := ownCgroup() // read once for both
	sweepCgroups(own)
	p := &Prepared{id: newTermID()}
	p.cg = newTermCgroupIn(own, p.id)
	if withWatchdog {
		p.wd = prepareWatchdog()
	}
	if dir != "" && fenceSupported {
		p.marker = unnamedMarker(dir)
	}
	return p
}

// unnamedMarker makes a term marker's inode in the lock directory dir,
// or returns nil where it cannot (the term then makes its marker anew).
func unnamedMarker(dir string) *os.File {
	d, err := oslock.OpenDir(dir, oslock.DirOptions{})
	if err != nil {
		return nil
	}
	defer d.Close()
	f, err := d.CreateUnnamed(0o600)
	if err != nil {
		return nil
	}
	return f
}

// Close removes what p made, unless a term took it. A nil *Prepared does
// nothing.
func (p *Prepared) Close() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		if p.taken {
			return
		}
		p.wd.close()
		if p.marker != nil {
			p.marker.Close()
		}
		if p.cg != nil {
			ctx, cancel := context.WithTimeout(context.Background(), fenceBudget)
			defer cancel()
			p.cg.remove(ctx)
		}
	})
}

// take gives p to a term, once: its id, cgroup, watchdog and unnamed
// marker (nil if none) become the term's.
func (p *Prepared) take() (id string, cg *termCgroup, wd *watchdog, marker *os.File, ok bool) {
	if p == nil {
		return "", nil, nil, nil, false
	}
	p.once.Do(func() { p.taken, ok = true, true })
	return p.id, p.cg, p.wd, p.marker, ok
}
