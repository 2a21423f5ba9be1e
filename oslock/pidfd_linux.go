package oslock

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

func sysOpenPidfd(pid int) (*os.File, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "pidfd"), nil
}

func sysWaitPidfd(ctx context.Context, pidfd *os.File) error {
	rc, err := pidfd.SyscallConn()
	if err != nil {
		return err
	}
	pidfd.SetReadDeadline(time.Time{}) // an earlier call's ctx may have set it
	stop := context.AfterFunc(ctx, func() { pidfd.SetReadDeadline(time.Now()) })
	defer stop()
	err = rc.Read(func(fd uintptr) bool {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, _ := unix.Poll(p, 0)
		return n > 0
	})
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}
