//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package oslock

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

func sysOpenDir(path string, opts DirOptions) (*Dir, error) {
	if path == "" {
		return nil, errors.New("oslock: empty lock directory path")
	}
	path = filepath.Clean(path)
	reserveSlot()
	if opts.Create {
		if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("oslock: cannot create lock directory: %w; check that its parent exists and is writable", err)
		}
	}
	fd, err := openNoFollow(unix.AT_FDCWD, path, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.ELOOP):
			return nil, insecure(path, "is a symbolic link", "point --dir at the real directory")
		case errors.Is(err, unix.ENOENT):
			return nil, explained{fmt.Sprintf("oslock: lock directory %s does not exist; create it with: mkdir -m 700 %s", path, path), fs.ErrNotExist}
		case errors.Is(err, unix.ENOTDIR):
			// Linux gives ENOTDIR, not ELOOP, for a symbolic link
			// opened with O_DIRECTORY|O_NOFOLLOW.
			var st unix.Stat_t
			if unix.Lstat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return nil, insecure(path, "is a symbolic link", "point --dir at the real directory")
			}
			return nil, fmt.Errorf("oslock: lock directory %s is not a directory; choose a directory", path)
		case errors.Is(err, unix.EACCES):
			return nil, explained{fmt.Sprintf("oslock: lock directory %s is not accessible (permission denied); use a directory you own", path), fs.ErrPermission}
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	st, err := checkDir(f, path, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Dir{f: f, path: path, group: opts.GroupShared, gid: st.Gid}, nil
}

func checkDir(f *os.File, path string, opts DirOptions) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return st, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if err := checkDirStat(int(f.Fd()), &st, path, opts); err != nil {
		return st, err
	}
	return st, nil
}

func checkDirStat(fd int, st *unix.Stat_t, path string, opts DirOptions) error {
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("oslock: %s is not a directory", path)
	}
	if uid := os.Geteuid(); int(st.Uid) != uid && !(opts.GroupShared && inGroup(int(st.Gid))) {
		return insecure(path, fmt.Sprintf("is owned by uid %d, not by you (uid %d)", st.Uid, uid),
			"use a directory you own, e.g. leave --dir unset for the private default")
	}
	perm := st.Mode & 0o7777
	if perm&0o002 != 0 {
		return insecure(path, fmt.Sprintf("is writable by others (mode %04o)", perm), "run: chmod o-w "+path+" (or chmod 700)")
	}
	if perm&0o020 != 0 && !opts.GroupShared {
		return insecure(path, fmt.Sprintf("is writable by its group (mode %04o)", perm),
			"run: chmod 700 "+path+", or opt into a group-shared directory")
	}
	if !opts.AllowUnsafeFS {
		if err := checkFS(fd, path); err != nil {
			return err
		}
	}
	return nil
}

// inGroup reports whether the caller is a member of gid: in a group-shared
// directory the group's members are trusted alike.
func inGroup(gid int) bool {
	if gid == os.Getegid() {
		return true
	}
	groups, _ := os.Getgroups()
	for _, g := range groups {
		if g == gid {
			return true
		}
	}
	return false
}

func openNoFollow(dirfd int, name string, flag int, perm uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

func (d *Dir) fd() int { return int(d.f.Fd()) }

func (d *Dir) dup() (*Dir, error) {
	if d == nil || d.f == nil {
		return nil, fmt.Errorf("oslock: %w: the lock directory handle is closed", os.ErrClosed)
	}
	fd, err := unix.FcntlInt(d.f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("oslock: duplicating the handle on %s: %w", d.path, err)
	}
	c := *d
	c.f = os.NewFile(uintptr(fd), d.path)
	return &c, nil
}

func (d *Dir) pathErr(op, name string, err error) error {
	if errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("%w: %s is a symbolic link; remove it", ErrSymlink, filepath.Join(d.path, name))
	}
	return &fs.PathError{Op: op, Path: filepath.Join(d.path, name), Err: err}
}

func (d *Dir) sysOpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	if d.group && flag&os.O_CREATE != 0 && flag&os.O_EXCL == 0 {
		return d.openShared(name, flag, perm)
	}
	return d.openFile(name, name, flag, perm, d.group && flag&os.O_CREATE != 0)
}

// openFile opens at, naming the file name in errors and in the result; with
// share set, a file of ours gets the group's access.
func (d *Dir) openFile(at, name string, flag int, perm os.FileMode, share bool) (*os.File, error) {
	// O_NONBLOCK so that a FIFO planted under the name cannot hang the
	// open; it is refused, and the flag cleared for the regular file.
	fd, st, err := d.openKind(at, name, flag|unix.O_NONBLOCK, uint32(perm.Perm()), unix.S_IFREG)
	if err != nil {
		return nil, err
	}
	if flag&unix.O_NONBLOCK == 0 {
		unix.SetNonblock(fd, false)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(d.path, name))
	if share && int(st.Uid) == os.Geteuid() {
		d.share(fd, &st, d.filePerm(uint32(perm.Perm())))
	}
	return f, nil
}

// openKind opens at (named name in errors) without following a link and
// refuses anything but a file of type kind (S_IFREG, S_IFIFO), closing it.
func (d *Dir) openKind(at, name string, flag int, perm uint32, kind uint32) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := openNoFollow(d.fd(), at, flag, perm)
	if err != nil {
		return -1, st, d.pathErr("open", name, err)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, d.pathErr("fstat", name, err)
	}
	if uint32(st.Mode)&unix.S_IFMT != kind {
		unix.Close(fd)
		what := "a regular file"
		if kind == unix.S_IFIFO {
			what = "a FIFO that leaderrun made"
		}
		return -1, st, foreignError{fmt.Sprintf("oslock: %s is not %s; remove it", filepath.Join(d.path, name), what)}
	}
	return fd, st, nil
}

// openShared opens name, creating it if missing so that no other member
// ever finds it without the group's access: created in place and then
// fchmod'ed, it would refuse for a moment a member that starts at the same
// time (two users' cron jobs of the same minute). A missing file is made
// under a temporary name, shared, and linked into place.
func (d *Dir) openShared(name string, flag int, perm os.FileMode) (*os.File, error) {
	for attempt := 0; ; attempt++ {
		f, err := d.openFile(name, name, flag&^os.O_CREATE, perm, true)
		if !errors.Is(err, fs.ErrNotExist) || attempt == 3 {
			return f, err
		}
		var rnd [8]byte
		rand.Read(rnd[:])
		tmp := ".oslock-new-" + hex.EncodeToString(rnd[:])
		if f, err = d.openFile(tmp, name, flag&^os.O_TRUNC|os.O_EXCL, perm, true); err != nil {
			return nil, err
		}
		err = linkat(d, tmp, name)
		unix.Unlinkat(d.fd(), tmp, 0)
		if err == nil {
			return f, nil
		}
		f.Close()
		if err != unix.EEXIST {
			return nil, d.pathErr("link", name, err)
		}
	}
}

// share gives a file or directory of ours in a group-shared directory the
// directory's group and at least perm. It is best effort: where it fails
// (we are not in the directory's group) the entry keeps our group, and
// other members get a permission error naming it.
func (d *Dir) share(fd int, st *unix.Stat_t, perm uint32) {
	chowned := false
	if st.Gid != d.gid && unix.Fchown(fd, -1, int(d.gid)) == nil {
		st.Gid, chowned = d.gid, true
	}
	// chown(2) by a non-root owner clears the setgid bit, so the mode is
	// set after it, also when it seems unchanged.
	have := uint32(st.Mode) & 0o7777
	if want := have | perm; chowned || want != have {
		if unix.Fchmod(fd, want) == nil {
			unix.Fstat(fd, st)
		}
	}
}

func (d *Dir) filePerm(perm uint32) uint32 {
	if d.group {
		perm |= perm & 0o700 >> 3
	}
	return perm
}

func (d *Dir) sysSub(name string, create bool, opts DirOptions) (*Dir, error) {
	if create {
		err := unix.Mkdirat(d.fd(), name, d.filePerm(0o700))
		if err != nil && err != unix.EEXIST {
			return nil, d.pathErr("mkdir", name, err)
		}
	}
	fd, err := openNoFollow(d.fd(), name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, d.pathErr("open", name, fs.ErrNotExist)
		}
		var st unix.Stat_t
		if errors.Is(err, unix.ENOTDIR) && unix.Fstatat(d.fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			err = unix.ELOOP // Linux says ENOTDIR for O_DIRECTORY|O_NOFOLLOW on a link
		}
		return nil, d.pathErr("open", name, err)
	}
	path := filepath.Join(d.path, name)
	f := os.NewFile(uintptr(fd), path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, d.pathErr("fstat", name, err)
	}
	if d.group && st.Mode&unix.S_IFMT == unix.S_IFDIR && int(st.Uid) == os.Geteuid() {
		d.share(fd, &st, unix.S_ISGID|d.filePerm(0o700)) // past the umask
	}
	opts.AllowUnsafeFS = true // same filesystem as d, already checked
	opts.GroupShared = d.group
	if err := checkDirStat(fd, &st, path, opts); err != nil {
		f.Close()
		return nil, err
	}
	return &Dir{f: f, path: path, group: d.group, gid: st.Gid}, nil
}

func (d *Dir) sysNames() ([]string, error) {
	fd, err := openNoFollow(d.fd(), ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, d.pathErr("open", ".", err)
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil && err != io.EOF {
		return nil, err
	}
	return names, nil
}

func (d *Dir) sysRemove(name string) error {
	if err := unix.Unlinkat(d.fd(), name, 0); err != nil {
		return d.pathErr("remove", name, err)
	}
	return nil
}

func (d *Dir) sysRemoveDir(name string) error {
	if err := unix.Unlinkat(d.fd(), name, unix.AT_REMOVEDIR); err != nil {
		return d.pathErr("rmdir", name, err)
	}
	return nil
}

func (d *Dir) sysLink(oldname, newname string) error {
	if err := linkat(d, oldname, newname); err != nil {
		return d.pathErr("link", newname, err)
	}
	return nil
}

func (d *Dir) sysRename(oldname, newname string) error {
	if err := unix.Renameat(d.fd(), oldname, d.fd(), newname); err != nil {
		return d.pathErr("rename", newname, err)
	}
	return nil
}

func (d *Dir) sysReadFile(name string, buf []byte) (int, error) {
	// O_NONBLOCK so that a FIFO planted under the name cannot hang the
	// open; it is refused. On a regular file it changes nothing.
	fd, _, err := d.openKind(name, name, unix.O_RDONLY|unix.O_NONBLOCK, 0, unix.S_IFREG)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Pread(fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, d.pathErr("read", name, err)
		}
		return n, nil
	}
}

func (d *Dir) sysLstat(name string) (FileID, int, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return FileID{}, 0, d.pathErr("lstat", name, err)
	}
	return FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}, int(st.Uid), nil
}

func (d *Dir) sysExists(name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(d.fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

func sysIDOf(f *os.File) (FileID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return FileID{}, &fs.PathError{Op: "fstat", Path: f.Name(), Err: err}
	}
	return FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}, nil
}

func (d *Dir) sysResolvedPath(name string) string {
	if procFD {
		return "/proc/self/fd/" + strconv.Itoa(d.fd()) + "/" + name
	}
	return filepath.Join(d.path, name)
}

func sysDirOwner(path string) (int, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		if err == unix.ENOENT || err == unix.ENOTDIR {
			return -1, &fs.PathError{Op: "stat", Path: path, Err: fs.ErrNotExist}
		}
		return -1, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return -1, &fs.PathError{Op: "stat", Path: path, Err: unix.ENOTDIR}
	}
	return int(st.Uid), nil
}

func sysCheckFS(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	return checkFS(fd, path)
}

func (d *Dir) sysID() (FileID, error) {
	if d == nil || d.f == nil {
		return FileID{}, fs.ErrClosed
	}
	return IDOf(d.f)
}

func sysLstatPath(path string) (FileID, int, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return FileID{}, 0, &fs.PathError{Op: "lstat", Path: path, Err: err}
	}
	return FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}, int(st.Uid), nil
}
