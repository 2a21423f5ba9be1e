package elect

import (
	"errors"
	"io/fs"
	"os"

	"github.com/leaderrun/leaderrun/oslock"
)

// A stopped waiter cannot take its turn, and no kernel event tells anyone
// that a process was stopped. The two waiters next in line are woken when
// a holder's beacon hangs up; when both are stopped, whoever ended the
// term looks at the head of the line and nudges the first running waiter
// behind the stopped ones (already when one of the two is: the other may
// stop before it takes its turn): a releasing holder, or the leaderrun command's
// watchdog when its holder died. The nudged waiter checks on the stopped
// ones after StallBound and passes them. A healthy handoff pays one lstat,
// one record read and one /proc read for this.

// nudgeMsg is what a nudge writes into a waiter's inbox.
var nudgeMsg = []byte("W\n")

// Nudge wakes the first running waiter of name in the lock directory dir
// that stands behind a stopped one, when one of the first two waiters is
// stopped, so that it passes the stopped ones. It is for a process that saw a holder's term end
// without a release (such as the leaderrun command's watchdog, once its
// leaderrun died): a release does the same by itself. It never blocks,
// takes no lock and changes nothing but the waiter's inbox.
func Nudge(dir, name string) {
	// A group-shared directory is opened as one only when it is one:
	// opening a private one so would share its queue directory.
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return
	}
	opts := oslock.DirOptions{AllowUnsafeFS: true, GroupShared: fi.Mode().Perm()&0o020 != 0}
	d, err := oslock.OpenDir(dir, opts)
	if err != nil {
		return
	}
	defer d.Close()
	q, err := d.Sub(name+queueSuffix, false, opts)
	if err != nil {
		return
	}
	defer q.Close()
	queue, err := listQueue(q)
	if err != nil {
		return
	}
	nudgeLine(q, queue)
}

// nudgeAfter is a release's look at the line behind the ticket it just
// gave up (whose number was seq).
func nudgeAfter(q *oslock.Dir, seq uint64) {
	if !stealsMaybe(q) && lineRuns(q, seq) {
		return
	}
	queue, err := listQueue(q)
	if err != nil {
		return
	}
	nudgeLine(q, queue)
}

// nudgeLine nudges the first running waiter of queue behind a stopped one
// when one of the first two waiters (tickets not granted) is stopped: the
// waiter behind a stopped one may be stopped too, or stop before it sees
// that the lock is free.
func nudgeLine(q *oslock.Dir, queue []entry) {
	seen, stopped := 0, false
	for _, e := range queue {
		r, err := readRecord(q, e.name)
		if err != nil || r.Epoch != 0 {
			continue // a holder, or not a request
		}
		seen++
		switch {
		case oslock.StateOf(r.PID) == oslock.ProcStopped:
			stopped = true
		case stopped:
			q.SignalBeacon(e.name+inboxSuffix, nudgeMsg)
			return
		case seen >= 2:
			return
		}
	}
}

// lineRuns reports whether the usual line follows the ticket numbered seq
// that a release just gave up: the next numbers are the next holder,
// which may have been granted already (its beacon hung up before this
// look), or even have come and gone, and then the next two waiters, both
// running. When they run, they (or the one behind them) take their turns
// without help, and the release need not list the queue, which it would
// read whole. Anything else (more numbers missing, a stopped waiter, more
// than one holder) is left to nudgeLine.
func lineRuns(q *oslock.Dir, seq uint64) bool {
	healthy, granted, missing := 0, 0, 0
	for n := seq + 1; healthy < 2; n++ {
		r, err := readRecord(q, ticketName(n, false))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Gone (released, given up) since the beacon's hang-up:
			// the release may have been slow to look.
			if missing++; missing > lineGone {
				return false
			}
		case err != nil:
			return false
		case r.Epoch != 0:
			// The next holder: skipped, as nudgeLine skips holders.
			if granted++; granted > 1 {
				return false
			}
		case oslock.StateOf(r.PID) == oslock.ProcStopped:
			return false
		default:
			healthy++
		}
	}
	return true
}

// lineGone is how many tickets right behind a released one lineRuns lets
// have gone before it lists the queue instead.
const lineGone = 4
