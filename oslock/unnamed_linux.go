package oslock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

func (d *Dir) sysCreateUnnamed(perm os.FileMode) (*os.File, error) {
	if d.group {
		return nil, ErrUnsupported // its group's access is given at the name
	}
	fd, err := openNoFollow(d.fd(), ".", unix.O_TMPFILE|unix.O_RDWR, uint32(perm.Perm()))
	if err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
			return nil, ErrUnsupported // a filesystem or kernel without O_TMPFILE
		}
		return nil, d.pathErr("open", "(unnamed)", err)
	}
	return os.NewFile(uintptr(fd), d.path+"/(unnamed)"), nil
}

func (d *Dir) sysLinkUnnamed(f *os.File, name string) error {
	if d.group {
		return ErrUnsupported
	}
	// The documented way to name an O_TMPFILE file without
	// CAP_DAC_READ_SEARCH (open(2)): its /proc/self/fd link, followed.
	src := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	for {
		err := unix.Linkat(unix.AT_FDCWD, src, d.fd(), name, unix.AT_SYMLINK_FOLLOW)
		switch {
		case err == nil:
			return nil
		case err == unix.EINTR:
			continue
		case errors.Is(err, unix.EEXIST):
			return d.pathErr("link", name, fs.ErrExist)
		case errors.Is(err, unix.EXDEV), errors.Is(err, unix.ENOENT):
			// Another filesystem (the directory was replaced), or no /proc.
			return fmt.Errorf("%w: %v", ErrUnsupported, d.pathErr("link", name, err))
		}
		return d.pathErr("link", name, err)
	}
}
