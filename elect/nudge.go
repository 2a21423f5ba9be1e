package elect

import (
	"os"

	"github.com/leaderrun/leaderrun/oslock"
)

// A stopped waiter cannot take its turn, and no kernel event tells anyone
// that a process was stopped. The two waiters next in line are woken when
// a holder's beacon hangs up; when both are stopped, whoever ended the
// term looks at the head of the line and nudges the first running waiter
// behind the stopped ones: a releasing holder, or the leaderrun command's
// watchdog when its holder died. The nudged waiter checks on the stopped
// ones after StallBound and passes them. A healthy handoff pays one lstat,
// one record read and one /proc read for this.

// nudgeMsg is what a nudge writes into a waiter's inbox.
var nudgeMsg = []byte("W\n")

// Nudge wakes the first running waiter of name in the lock directory dir
// when the waiter at the head of its line is stopped, so that it passes
// the stopped ones. It is for a process that saw a holder's term end
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
	if !stealsMaybe(q) {
		// The usual line: the next number is the next waiter.
		next := entry{name: ticketName(seq+1, false), seq: seq + 1}
		if r, err := readRecord(q, next.name); err == nil {
			if r.Epoch != 0 || oslock.StateOf(r.PID) != oslock.ProcStopped {
				return
			}
		}
	}
	queue, err := listQueue(q)
	if err != nil {
		return
	}
	nudgeLine(q, queue)
}

// nudgeLine nudges the first running waiter of queue if the first waiter
// (the first ticket not granted) is stopped.
func nudgeLine(q *oslock.Dir, queue []entry) {
	headStopped := false
	for _, e := range queue {
		r, err := readRecord(q, e.name)
		if err != nil {
			continue
		}
		if r.Epoch != 0 {
			continue // a holder
		}
		if oslock.StateOf(r.PID) == oslock.ProcStopped {
			headStopped = true
			continue
		}
		if headStopped {
			q.SignalBeacon(e.name+inboxSuffix, nudgeMsg)
		}
		return
	}
}
