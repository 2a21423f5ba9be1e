package bus

import (
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/oslock"
)

// fileListener accepts on a listening socket moved above the inotify
// instance, for the same reason as aboveWatches: a dying leader's
// listener, left open during the instance's teardown, would take a
// member's reconnection into its backlog and never answer it.
type fileListener struct{ f *os.File }

func listenerAbove(ln *net.UnixListener) sockListener {
	rc, err := ln.SyscallConn()
	if err != nil {
		return netListener{ln}
	}
	nfd := -1
	rc.Control(func(fd uintptr) { nfd, _ = oslock.DupAboveWatches(int(fd)) })
	if nfd < 0 {
		return netListener{ln}
	}
	ln.Close()
	return fileListener{os.NewFile(uintptr(nfd), "bus listener")}
}

func (l fileListener) accept() (sockConn, error) {
	rc, err := l.f.SyscallConn()
	if err != nil {
		return nil, net.ErrClosed
	}
	nfd := -1
	var aerr error
	err = rc.Read(func(fd uintptr) bool {
		nfd, _, aerr = unix.Accept4(int(fd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		return aerr != unix.EAGAIN
	})
	if err != nil {
		return nil, net.ErrClosed
	}
	if aerr != nil {
		return nil, os.NewSyscallError("accept4", aerr)
	}
	if hi, _ := oslock.DupAboveWatches(nfd); hi >= 0 {
		unix.Close(nfd)
		nfd = hi
	}
	return os.NewFile(uintptr(nfd), "bus member"), nil
}

func (l fileListener) Close() error { return l.f.Close() }
