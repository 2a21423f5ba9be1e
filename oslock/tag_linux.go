package oslock

import (
	"os"

	"golang.org/x/sys/unix"
)

func sysSetTag(f *os.File, key string, value []byte) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) { unix.Fsetxattr(int(fd), "user."+key, value, 0) })
}

func sysTag(f *os.File, key string) ([]byte, bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, false
	}
	buf := make([]byte, 64)
	n := -1
	rc.Control(func(fd uintptr) {
		if m, err := unix.Fgetxattr(int(fd), "user."+key, buf); err == nil {
			n = m
		}
	})
	if n < 0 {
		return nil, false
	}
	return buf[:n], true
}
