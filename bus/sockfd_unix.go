//go:build unix && !linux

package bus

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// socketFD is a new non-blocking, close-on-exec Unix stream socket. Not
// every unix has SOCK_CLOEXEC, so the flag is set under syscall.ForkLock,
// as package net does, lest a concurrent fork+exec inherit the descriptor.
func socketFD() (int, error) {
	syscall.ForkLock.RLock()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	return nonblock(fd, err)
}

// acceptFD accepts one connection as a non-blocking, close-on-exec socket.
func acceptFD(fd int) (int, error) {
	syscall.ForkLock.RLock()
	nfd, _, err := unix.Accept(fd)
	if err == nil {
		unix.CloseOnExec(nfd)
	}
	syscall.ForkLock.RUnlock()
	return nonblock(nfd, err)
}

func nonblock(fd int, err error) (int, error) {
	if err != nil {
		return -1, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}
