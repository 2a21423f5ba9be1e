package cmd

import "golang.org/x/sys/unix"

// sdNotify sends msg as one datagram to the unix socket addr: a path, or
// with a leading @ a name in Linux's abstract namespace (x/sys/unix turns
// the @ into the leading NUL byte). The socket is unbound: the service
// manager identifies the sender by its credentials (SCM_CREDENTIALS,
// which the kernel attaches), not by an address.
func sdNotify(addr, msg string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	// MSG_DONTWAIT: a manager whose queue is full loses the message
	// rather than stall leaderrun (sd_notify(3) would block).
	return unix.Sendto(fd, []byte(msg), unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, &unix.SockaddrUnix{Name: addr})
}
