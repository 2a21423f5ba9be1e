package supervise

import (
	"context"
	"sync"
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
type Prepared struct {
	id    string
	cg    *termCgroup
	once  sync.Once
	taken bool // by a term, which owns the cgroup from then on
}

// Prepare prepares a term. It never fails: where no cgroup can be made,
// the term has its id only. On Linux it also starts, on a goroutine of its
// own, the check the Go runtime makes once before a first fork (that
// pidfds work, with a probe child), so that it is not made on the way to
// COMMAND.
func Prepare() *Prepared {
	go warmSpawn()
	own := ownCgroup() // read once for both
	sweepCgroups(own)
	p := &Prepared{id: newTermID()}
	p.cg = newTermCgroupIn(own, p.id)
	return p
}

// Close removes what p made, unless a term took it. A nil *Prepared does
// nothing.
func (p *Prepared) Close() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		if p.cg != nil && !p.taken {
			ctx, cancel := context.WithTimeout(context.Background(), fenceBudget)
			defer cancel()
			p.cg.remove(ctx)
		}
	})
}

// take gives p to a term, once: its id and cgroup become the term's.
func (p *Prepared) take() (id string, cg *termCgroup, ok bool) {
	if p == nil {
		return "", nil, false
	}
	p.once.Do(func() { p.taken, ok = true, true })
	return p.id, p.cg, ok
}
