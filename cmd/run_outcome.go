package cmd

import (
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/layout"
)

// The outcome of a term or of a request that failed: the exit status and
// the one line that says what happened and what to do.

// explain is explainIn for the lock directory in use.
func (o *runOptions) explain(err error) error {
	if o.dir == "" {
		return explainIn(elect.DefaultDir(), false, err)
	}
	return explainIn(o.dir, true, err)
}

// overdue returns the exit for a term that is over, though this leaderrun
// may not have noticed yet: it ended, or its deadline passed while this
// leaderrun was stopped or starved (the watchdog then stops COMMAND).
// COMMAND must not start, or be reported as if it had run its course.
func (o *runOptions) overdue(lead *elect.Leadership) error {
	if lead.Err() != nil {
		return o.ended(lead)
	}
	if at, _, ok := lead.Deadline(); ok && !time.Now().Before(at) {
		return exitf(ExitLockLost, "leaderrun: the term of %s (epoch %d) passed its deadline while this leaderrun was stopped or starved, so its lease may have gone to another host; COMMAND was stopped", o.name, lead.Epoch())
	}
	return nil
}

// lockDenied reports whether NAME's lock file in dir can no longer be
// looked at for want of permission: the directory's mode was taken away
// (chmod 000), which the election layer sees as a lock file gone.
func lockDenied(dir, name string) bool {
	if dir == "" {
		return false
	}
	_, err := os.Lstat(layout.LockPath(dir, name))
	return errors.Is(err, fs.ErrPermission)
}

func (o *runOptions) ended(lead *elect.Leadership) error {
	// A lock directory removed under the holder (a cleaner, logout, rm
	// -rf) is no steal, whatever the election layer took it for.
	if dir := lead.Dir(); dir != "" {
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			fix := "create it again (mkdir -m 700 " + dir + ") and keep cleaners away from it"
			if o.dir == "" {
				fix = "run leaderrun again to create it"
			}
			return exitf(ExitNoPerm, "leaderrun: the lock directory %s was removed while this leaderrun led %s (epoch %d); COMMAND was stopped; %s", dir, o.name, lead.Epoch(), fix)
		}
	}
	if err := lead.Err(); errors.Is(err, elect.ErrStolen) {
		return exitf(ExitStolen, "leaderrun: leadership of %s (epoch %d) was stolen; COMMAND was stopped", o.name, lead.Epoch())
	} else if errors.Is(err, elect.ErrSessionLost) {
		return exitf(ExitLockLost, "leaderrun: the term of %s (epoch %d) was lost with its session (%v); COMMAND was stopped; another host may lead now", o.name, lead.Epoch(), rootCause(err))
	} else if errors.Is(err, elect.ErrLockLost) && lockDenied(lead.Dir(), o.name) {
		return exitf(ExitNoPerm, "leaderrun: this leaderrun lost its access to the lock directory %s (permission denied: its mode or owner was changed, e.g. chmod 000) while it led %s (epoch %d), so it could no longer check that it still held the lock; COMMAND was stopped; give the directory back to its owner, private (chmod 700 %s), and run again", lead.Dir(), o.name, lead.Epoch(), lead.Dir())
	} else if errors.Is(err, elect.ErrLockLost) {
		return exitf(ExitLockLost, "leaderrun: the lock file %s was removed or replaced while this leaderrun led %s (epoch %d); COMMAND was stopped; keep cleaners away from the lock directory", layout.LockPath(lead.Dir(), o.name), o.name, lead.Epoch())
	} else {
		return exitf(ExitSoftware, "leaderrun: leadership of %s (epoch %d) ended: %v; COMMAND was stopped", o.name, lead.Epoch(), err)
	}
}
