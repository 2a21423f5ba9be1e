package bus

import "golang.org/x/sys/unix"

func sockPeerCred(fd uintptr) (uid, pid int, err error) {
	cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return -1, 0, err
	}
	return int(cred.Uid), int(cred.Pid), nil
}
