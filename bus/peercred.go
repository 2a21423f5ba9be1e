package bus

import "syscall"

// peerCred returns the uid and pid of the process at the other end of c,
// as the kernel recorded them at connect(2) time, so that a peer cannot
// lie about them. pid is 0 where the platform does not say.
func peerCred(c syscall.Conn) (uid, pid int, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, 0, err
	}
	cerr := raw.Control(func(fd uintptr) { uid, pid, err = sockPeerCred(fd) })
	if cerr != nil {
		return -1, 0, cerr
	}
	return uid, pid, err
}
