package bus

import "golang.org/x/sys/unix"

// socketFD is a new non-blocking, close-on-exec Unix stream socket.
func socketFD() (int, error) {
	return unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
}

// acceptFD accepts one connection as a non-blocking, close-on-exec socket.
func acceptFD(fd int) (int, error) {
	nfd, _, err := unix.Accept4(fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
	return nfd, err
}
