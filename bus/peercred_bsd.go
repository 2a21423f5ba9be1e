//go:build darwin || freebsd

package bus

import "golang.org/x/sys/unix"

func sockPeerCred(fd uintptr) (uid, pid int, err error) {
	cred, err := unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return -1, 0, err
	}
	return int(cred.Uid), sockPeerPID(fd), nil
}
