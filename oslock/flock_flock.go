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

// lockBlocking takes the lock on fd, sleeping in flock(2) until it is
// free. EINTR is retried: Go's handlers are SA_RESTART, so a signal does
// not cut the wait short anyway.
func lockBlocking(fd int, exclusive bool) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	return flock(fd, how)
}

func dupFD(fd int) (int, error) { return unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0) }

func closeFD(fd int) { unix.Close(fd) }
