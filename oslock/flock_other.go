//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd)

package oslock

func tryLock(fd int, exclusive bool) (bool, error) { return false, ErrUnsupported }

func unlock(fd int) error { return ErrUnsupported }
