package cmd

import (
	"errors"
	"io/fs"
	"os"
	"strconv"

	"github.com/leaderrun/leaderrun/oslock"
)

// termSuffix names the marker <dir>/<name>.cmd, which exists while an
// exclusive leader's COMMAND may be running. The leader removes it once
// COMMAND's process group has been stopped, before it releases the lock.
// A new leader that finds it knows the last term ended without that
// cleanup (its leaderrun was killed), so leftovers may still run; only
// then does it pay for the orphan fence's scan of /proc.
const termSuffix = ".cmd"

// beginTerm fences off what an earlier term may have left running and
// marks this term; the returned function ends the mark. Shared holders
// run side by side, so they have no single marker and always fence.
func beginTerm(dir, name string, exclusive bool) (end func()) {
	if !exclusive {
		fenceOrphans(dir, name, false)
		return func() {}
	}
	d, err := oslock.OpenDir(dir, oslock.DirOptions{GroupShared: true, AllowUnsafeFS: true})
	if err != nil {
		fenceOrphans(dir, name, true)
		return func() {}
	}
	marker := name + termSuffix
	if _, _, err := d.Lstat(marker); !errors.Is(err, fs.ErrNotExist) {
		fenceOrphans(dir, name, true)
	}
	f, err := d.OpenFile(marker, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
		f.Close()
	}
	return func() {
		d.Remove(marker)
		d.Close()
	}
}
