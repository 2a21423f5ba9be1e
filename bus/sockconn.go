package bus

import (
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/oslock"
)

// sockConn is what the leader's side of a member's connection needs: a
// *net.UnixConn, or the *os.File that aboveWatches made of one.
type sockConn interface {
	io.ReadWriteCloser
	syscall.Conn
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

var _ sockConn = (*os.File)(nil)

// aboveWatches gives the leader's end of a member's connection a
// descriptor above the process's inotify instance (see
// oslock.AboveWatches). A leader that dies has its descriptors let go from
// the highest down, and the instance's teardown waits for an RCU grace
// period (about 10ms): a connection numbered below it would tell its
// member that the leader is gone only after that wait. The moved
// descriptor, still non-blocking, is used as an *os.File, which Go's
// poller serves as it does a socket (net.FileConn would duplicate it back
// to the lowest free number). Where nothing needs moving, or moving
// fails, uc is kept.
func aboveWatches(uc *net.UnixConn) sockConn {
	rc, err := uc.SyscallConn()
	if err != nil {
		return uc
	}
	nfd := -1
	rc.Control(func(fd uintptr) { nfd, _ = oslock.DupAboveWatches(int(fd)) })
	if nfd < 0 {
		return uc
	}
	f := os.NewFile(uintptr(nfd), "bus member")
	uc.Close()
	return f
}

// sockListener is the leader's listening socket: a *net.UnixListener, or
// the *os.File that listenerAbove made of one.
type sockListener interface {
	accept() (sockConn, error)
	Close() error
}

type netListener struct{ *net.UnixListener }

func (l netListener) accept() (sockConn, error) {
	uc, err := l.AcceptUnix()
	if err != nil {
		return nil, err
	}
	return aboveWatches(uc), nil
}
