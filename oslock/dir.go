package oslock

import (
	"fmt"
	"os"
)

// Dir is a lock directory that has been checked once by [OpenDir] and is
// from then on used only through its descriptor, so that renaming or
// replacing the path afterwards cannot redirect what is written.
type Dir struct {
	f     *os.File
	path  string
	group bool   // group-shared: files and subdirectories get group access
	gid   uint32 // the directory's group, given to what we create in it
}

// DirOptions says how [OpenDir] treats the directory.
type DirOptions struct {
	// Create makes the directory (mode 0700) when it is missing. Only the
	// last path element is created. Default false: a missing directory
	// is an error.
	Create bool
	// GroupShared accepts a directory that its group may write to, for
	// contenders of several users in one group. Default false.
	GroupShared bool
	// AllowUnsafeFS skips the refusal of network and FUSE filesystems.
	// Default false.
	AllowUnsafeFS bool
}

// FileID names an inode: what /proc/locks reports locks against.
type FileID struct {
	Dev uint64
	Ino uint64
}

// Path returns the path the directory was opened with.
func (d *Dir) Path() string { return d.path }

// Dup returns another handle on the very directory d was opened on (not
// its path opened anew), with d's options and checks; the caller closes
// it. A directory replaced at the path since is not followed.
func (d *Dir) Dup() (*Dir, error) { return d.dup() }

// Close releases the directory's descriptor. It is idempotent.
func (d *Dir) Close() error {
	if d == nil || d.f == nil {
		return nil
	}
	err := d.f.Close()
	d.f = nil
	return err
}

func insecure(path, why, fix string) error {
	return fmt.Errorf("%w: %s %s; %s", ErrInsecureDir, path, why, fix)
}
