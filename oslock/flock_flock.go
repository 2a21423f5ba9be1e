//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package oslock

import (
	"errors"

	"golang.org/x/sys/unix"
)

func flock(fd int, how int) error {
	for {
		err := unix.Flock(fd, how)
		if err != unix.EINTR {
			return err
		}
	}
}

func tryLock(fd int, exclusive bool) (bool, error) {
	how := unix.LOCK_SH | unix.LOCK_NB
	if exclusive {
		how = unix.LOCK_EX | unix.LOCK_NB
	}
	switch err := flock(fd, how); {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return false, nil
	case errors.Is(err, unix.ENOLCK), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
		return false, errors.Join(ErrUnsupported, err)
	default:
		return false, err
	}
}

func unlock(fd int) error { return flock(fd, unix.LOCK_UN) }
