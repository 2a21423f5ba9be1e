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

// OpenDir opens and checks the lock directory at path. It refuses a symbolic
// link, a directory owned by another user, one writable by others (or by its
// group unless opts.GroupShared), and, unless opts.AllowUnsafeFS, a network or
// FUSE filesystem, which returns [ErrUnsupported] naming the filesystem.
func OpenDir(path string, opts DirOptions) (*Dir, error) { return sysOpenDir(path, opts) }

// OpenFile opens name inside the directory without following a symbolic
// link; flag and perm are as for os.OpenFile. In a group-shared directory a
// file of ours opened with O_CREATE gets the directory's group (also where
// the directory lacks the setgid bit) and perm's owner bits for the group
// too, whatever the umask, so that every member can open, lock and read it.
func (d *Dir) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return d.sysOpenFile(name, flag, perm)
}

// ReadFile reads the start of the regular file name (a symbolic link is
// not followed, and anything but a regular file is refused as
// ErrForeignEntry) into buf with one read, and returns how many bytes it
// read: fewer than len(buf) only at the end of the file. It keeps no
// descriptor, and costs an open, a stat, a read and a close: less than
// OpenFile and a read, for the small records read on every hand-off.
func (d *Dir) ReadFile(name string, buf []byte) (int, error) { return d.sysReadFile(name, buf) }

// Sub opens the subdirectory name, creating it with mode 0700 if create is
// set, and checks it as [OpenDir] does. In a group-shared directory a
// subdirectory of ours gets the directory's group and mode 2770 (group
// rwx, setgid, no sticky bit), also when it exists already, so that the
// files every member creates in it get that group and any member may remove
// a dead member's file.
func (d *Dir) Sub(name string, create bool, opts DirOptions) (*Dir, error) {
	return d.sysSub(name, create, opts)
}

// Names lists the directory's entries, in no particular order.
func (d *Dir) Names() ([]string, error) { return d.sysNames() }

// Remove unlinks the file name. A missing file is reported as fs.ErrNotExist.
func (d *Dir) Remove(name string) error { return d.sysRemove(name) }

// RemoveDir removes the empty subdirectory name.
func (d *Dir) RemoveDir(name string) error { return d.sysRemoveDir(name) }

// Link makes newname a second name of oldname without following links. It
// fails with fs.ErrExist if newname exists: it never replaces a file.
func (d *Dir) Link(oldname, newname string) error { return d.sysLink(oldname, newname) }

// CreateUnnamed makes a regular file without a name (mode perm) on the
// directory's filesystem, for [Dir.LinkUnnamed] to name later: its inode
// is allocated now, off the path that names it, and goes with its last
// descriptor if it is never named. It answers [ErrUnsupported] where the
// system or filesystem has no such files (Linux's O_TMPFILE), and in a
// group-shared directory.
func (d *Dir) CreateUnnamed(perm os.FileMode) (*os.File, error) { return d.sysCreateUnnamed(perm) }

// LinkUnnamed gives f, made by CreateUnnamed in any directory of the same
// filesystem, the name name in d. It fails with fs.ErrExist if name
// exists, as O_CREATE|O_EXCL would, and with [ErrUnsupported] where it
// cannot be done (another filesystem, no /proc): make the file anew then.
func (d *Dir) LinkUnnamed(f *os.File, name string) error { return d.sysLinkUnnamed(f, name) }

// Rename renames oldname to newname inside the directory, replacing newname.
func (d *Dir) Rename(oldname, newname string) error { return d.sysRename(oldname, newname) }

// Lstat returns the identity and owner of name without following a link.
func (d *Dir) Lstat(name string) (FileID, int, error) { return d.sysLstat(name) }

// Exists reports whether name exists inside d (not following a link): an
// lstat that builds no error for a missing name, for a caller that checks
// many names of which most are gone.
func (d *Dir) Exists(name string) bool { return d.sysExists(name) }

// IDOf returns the identity of an open file.
func IDOf(f *os.File) (FileID, error) { return sysIDOf(f) }

// ResolvedPath returns a path to name that goes through the directory's
// descriptor where the platform allows it (/proc/self/fd on Linux), so that
// path-based calls such as inotify_add_watch and bind(2) cannot be
// redirected by renaming the directory, and stay short.
func (d *Dir) ResolvedPath(name string) string { return d.sysResolvedPath(name) }

// DirOwner returns the uid that owns the directory at path, following
// symbolic links. A missing path, or a parent that is not a directory,
// matches fs.ErrNotExist; a path that is not a directory matches
// syscall.ENOTDIR.
func DirOwner(path string) (int, error) { return sysDirOwner(path) }

// CheckFS returns an error matching [ErrUnsupported], naming the
// filesystem, when the directory at path is on one where flock cannot be
// trusted (those [OpenDir] refuses), and nil when it is local. Unlike
// OpenDir it follows a symbolic link at path.
func CheckFS(path string) error { return sysCheckFS(path) }

// ID returns the identity of the directory itself.
func (d *Dir) ID() (FileID, error) { return d.sysID() }

// LstatPath returns the identity of path without following a final link.
func LstatPath(path string) (FileID, int, error) { return sysLstatPath(path) }

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
