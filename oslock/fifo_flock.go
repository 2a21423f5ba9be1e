//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package oslock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

func (d *Dir) makeBeacon(name string, perm os.FileMode) error {
	if err := mkfifoat(d, name, d.filePerm(uint32(perm.Perm()))); err != nil {
		return d.pathErr("mkfifo", name, err)
	}
	if d.group {
		// The directory's group and its access, past the umask; a FIFO
		// cannot be opened without blocking before it has a reader, so by
		// name, without following a link planted meanwhile.
		unix.Fchownat(d.fd(), name, -1, int(d.gid), unix.AT_SYMLINK_NOFOLLOW)
		unix.Fchmodat(d.fd(), name, d.filePerm(uint32(perm.Perm())), 0)
	}
	return nil
}

func (d *Dir) openBeacon(name string, owner bool) (*os.File, error) {
	flag := unix.O_RDONLY
	if owner {
		flag = unix.O_RDWR
	}
	fd, _, err := d.openKind(name, name, flag|unix.O_NONBLOCK, 0, unix.S_IFIFO)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), filepath.Join(d.path, name)), nil
}

func (d *Dir) signalBeacon(name string, msg []byte) error {
	fd, err := openNoFollow(d.fd(), name, unix.O_WRONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.ENXIO) || errors.Is(err, unix.ENOENT) {
			return d.pathErr("open", name, fs.ErrNotExist)
		}
		return d.pathErr("open", name, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return fmt.Errorf("oslock: %s is not a FIFO that leaderrun made; remove it", filepath.Join(d.path, name))
	}
	for {
		_, err := unix.Write(fd, msg)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EPIPE:
			return d.pathErr("write", name, fs.ErrNotExist)
		case err != nil:
			return d.pathErr("write", name, err)
		}
		return nil
	}
}

func hungUp(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return true
	}
	hup := true
	rc.Control(func(fd uintptr) {
		var buf [64]byte
		for {
			n, err := unix.Read(int(fd), buf[:])
			if err == unix.EINTR || n > 0 {
				continue
			}
			hup = n == 0 && err == nil
			return
		}
	})
	return hup
}
