package remote

import (
	"sync"
	"time"
)

// Deadline is the instant by which every term of a lease session ends,
// by this process's monotonic clock: the send time of the last
// acknowledged renewal plus the TTL the server granted, less the margin.
// The server set the lease's expiry after it received that renewal, so
// the terms end margin before the lease can expire and anyone else can
// be granted, whatever the network or the server does. It only moves
// later, and never once it has passed: a process stopped past it finds
// its terms over however its renewals come back. The zero Deadline is
// unusable; Start it first.
type Deadline struct {
	mu    sync.Mutex
	at    time.Time
	moved chan struct{} // closed, and replaced, when at moves
}

// Start sets the first deadline, before any other use.
func (d *Deadline) Start(at time.Time) {
	d.at, d.moved = at, make(chan struct{})
}

// At is the deadline.
func (d *Deadline) At() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at
}

// Moves is the deadline and a channel closed when it moves: an
// elect.Term's Deadline.
func (d *Deadline) Moves() (time.Time, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at, d.moved
}

// Passed reports whether the deadline has passed.
func (d *Deadline) Passed() bool { return !time.Now().Before(d.At()) }

// Extend moves the deadline to at, for a renewal acknowledged, if that
// is later and the deadline has not passed yet.
func (d *Deadline) Extend(at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if at.After(d.at) && time.Now().Before(d.at) {
		d.at = at
		close(d.moved)
		d.moved = make(chan struct{})
	}
}
