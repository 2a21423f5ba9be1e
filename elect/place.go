package elect

import (
	"os"
	"slices"

	"github.com/leaderrun/leaderrun/oslock"
)

// A request's place in the line: the tickets known to be ahead of it, and
// the beacons of those it waits on, kept so that a ticket being put back
// keeps its place.

// closeBeacons closes the beacons kept open.
func (a *acquirer) closeBeacons() {
	for n, f := range a.beacons {
		f.Close()
		delete(a.beacons, n)
	}
}

// beacon returns the beacon of ticket name, opened once and kept: a ticket
// whose name goes but whose beacon has not hung up is still alive (being
// put back after its queue was removed), and keeps its place.
func (a *acquirer) beacon(name string) (*os.File, error) {
	if f := a.beacons[name]; f != nil {
		if !oslock.HungUp(f) {
			return f, nil
		}
		// Its owner let go of it, or put its ticket back with a new one.
		f.Close()
		delete(a.beacons, name)
	}
	f, err := a.q.OpenBeacon(name+beaconSuffix, false)
	if err != nil {
		return nil, err
	}
	if a.beacons == nil {
		a.beacons = map[string]*os.File{}
	}
	a.beacons[name] = f
	return f, nil
}

// stillAhead adds to ahead (in order) the tickets we saw ahead before
// whose names are gone but whose owners still hold their beacons; the
// beacons of tickets that are gone for good are closed.
func (a *acquirer) stillAhead(ahead []entry) []entry {
	for n, f := range a.beacons {
		if slices.ContainsFunc(ahead, func(e entry) bool { return e.name == n }) {
			continue
		}
		if oslock.HungUp(f) {
			f.Close()
			delete(a.beacons, n)
			continue
		}
		if e, ok := parseTicket(n); ok && before(e, a.tk.e) {
			ahead = append(ahead, e)
		}
	}
	slices.SortFunc(ahead, func(x, y entry) int {
		switch {
		case before(x, y):
			return -1
		case before(y, x):
			return 1
		}
		return 0
	})
	return ahead
}

// takePlace notes, at once after our ticket is linked, which tickets are
// ahead of us and opens the beacons of the ones we will wait on first: a
// ticket whose queue is removed a moment later (a cleaner, an rm -rf) is
// then still known to be ahead while its owner puts it back.
func (a *acquirer) takePlace() {
	ahead, err := a.aheadNow()
	if err != nil {
		return
	}
	for i := 0; i < 2; i++ {
		b, ok := a.blockerOf(ahead, a.req.Mode, a.req.Steal, false)
		if !ok {
			return
		}
		a.beacon(b.name)
		for j := len(ahead) - 1; j >= 0; j-- {
			if ahead[j].name == b.name {
				ahead = ahead[:j]
				break
			}
		}
	}
}

// keepTicket puts our ticket back when its name or its whole queue
// directory was removed (by hand, or by a cleaner), under the same number,
// so that the request keeps its place.
func (a *acquirer) keepTicket() error {
	if a.tk.present() {
		return nil
	}
	if id, _, err := a.dir.Lstat(a.name + queueSuffix); err != nil || !a.sameDir(id) {
		if err := a.openQueue(); err != nil {
			return err
		}
	}
	// Our FIFOs may still be there when only the ticket went.
	for _, f := range []struct {
		suffix string
		f      *os.File
	}{{beaconSuffix, a.tk.beacon}, {inboxSuffix, a.tk.inbox}} {
		if id, err := oslock.IDOf(f.f); err == nil {
			if cur, _, err := a.q.Lstat(a.tk.e.name + f.suffix); err == nil && cur == id {
				a.q.Remove(a.tk.e.name + f.suffix)
			}
		}
	}
	t, err := publish(a.q, a.tk.e, a.tk.rec)
	if err != nil {
		return err
	}
	oslock.Drop(a.tk.f)
	a.tk.beacon.Close()
	a.tk.inbox.Close()
	a.tk = t
	return nil
}

func (a *acquirer) sameDir(id oslock.FileID) bool {
	cur, err := a.q.ID()
	return err == nil && cur == id
}

// headAfter is how many known tickets ahead make the head of the line's
// hint worth its read.
const headAfter = 4

// aheadNow returns the tickets ahead of ours. Tickets ahead can only go
// (new ones join behind us: numbers are drawn and published under the
// state lock), except steals, which go first, and tickets put back after
// their queue was removed (kept by their beacons, see stillAhead): so
// unless a steal may be queued, the tickets seen at the last listing that
// are still there are the ones to wait on, and a handoff costs one lstat
// per ticket still ahead instead of a listing of the whole queue. A
// waiter that joined behind k others would check them all at its first
// wake, when most have gone (N²/2 lookups over a chain of N): the head of
// the line that the last grant left (see head.go) drops those below it
// without a lookup.
func (a *acquirer) aheadNow() ([]entry, error) {
	if a.known != nil && !a.req.Steal && !stealsMaybe(a.q) {
		// A ticket whose name is gone but whose beacon we hold alive is
		// being put back (its queue was removed): it stays known, and is
		// found again under its name once it is back. The tickets below
		// the head of the line are gone without looking (see head.go).
		var head uint64
		if len(a.known) > headAfter {
			head = a.headHint()
		}
		// Only tickets at or after the first whose beacon we keep can be
		// kept by it: the many below it are dropped without a lookup.
		first, any := a.firstBeacon()
		kept := a.known[:0]
		for _, e := range a.known {
			if (e.steal || e.seq >= head) && a.q.Exists(e.name) {
				kept = append(kept, e)
			} else if !any || before(e, first) {
				continue
			} else if f := a.beacons[e.name]; f != nil && !oslock.HungUp(f) {
				kept = append(kept, e)
			}
		}
		a.known = kept
		return a.stillAhead(slices.Clone(kept)), nil
	}
	queue, err := listQueue(a.q)
	if err != nil {
		return nil, err
	}
	ahead := a.ahead(queue)
	if ahead != nil {
		a.known = slices.Clone(ahead)
		ahead = a.stillAhead(ahead)
	}
	return ahead, nil
}

// firstBeacon is, in queue order, the first of the tickets whose beacons
// we keep; any is false when we keep none.
func (a *acquirer) firstBeacon() (first entry, any bool) {
	for n := range a.beacons {
		if e, ok := parseTicket(n); ok && (!any || before(e, first)) {
			first, any = e, true
		}
	}
	return first, any
}

// moved reports whether ticket b is one we know only by its beacon: its
// name is gone (its queue was removed) but its owner lives.
func (a *acquirer) moved(b entry) bool {
	_, _, err := a.q.Lstat(b.name)
	return err != nil && a.beacons[b.name] != nil
}

// ahead returns the tickets before ours, nearest last. A listing without
// our ticket (removed since the last look) returns nil, and the caller
// looks again, which puts the ticket back first.
func (a *acquirer) ahead(queue []entry) []entry {
	for i, e := range queue {
		if e.name == a.tk.e.name {
			return queue[:i]
		}
	}
	return nil
}
