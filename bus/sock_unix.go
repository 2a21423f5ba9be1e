//go:build unix

package bus

import (
	"context"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// sockConn is a connected socket: a non-blocking descriptor in an os.File,
// named by the path a user knows the socket by (in its errors).
type sockConn struct{ *os.File }

// CloseWrite shuts down the writing half, as net.UnixConn's does.
func (c sockConn) CloseWrite() error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = unix.Shutdown(int(fd), unix.SHUT_WR) }); err != nil {
		return err
	}
	return os.NewSyscallError("shutdown", serr)
}

// sockListener is a listening socket; the path is never unlinked by it.
type sockListener struct {
	f      *os.File
	closed atomic.Bool
}

// listenUnix binds and listens on path, naming it name in errors.
func listenUnix(path, name string) (*sockListener, error) {
	fd, err := socketFD()
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind", err)
	}
	if err := unix.Listen(fd, listenBacklog); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("listen", err)
	}
	return &sockListener{f: os.NewFile(uintptr(fd), name)}, nil
}

// accept waits for the next connection; after Close it fails with
// errSockClosed.
func (l *sockListener) accept() (sockConn, error) {
	raw, err := l.f.SyscallConn()
	if err != nil {
		return sockConn{}, err
	}
	nfd, aerr := -1, error(nil)
	err = raw.Read(func(fd uintptr) bool {
		for {
			nfd, aerr = acceptFD(int(fd))
			// Go's poller is edge-triggered: retry at once what did not
			// consume the pending connection.
			if aerr != unix.EINTR && aerr != unix.ECONNABORTED {
				return aerr != unix.EAGAIN
			}
		}
	})
	switch {
	case l.closed.Load():
		if err == nil && aerr == nil {
			unix.Close(nfd)
		}
		return sockConn{}, errSockClosed
	case err != nil:
		return sockConn{}, err
	case aerr != nil:
		return sockConn{}, os.NewSyscallError("accept", aerr)
	}
	return sockConn{os.NewFile(uintptr(nfd), l.f.Name())}, nil
}

// Close stops accepting; a waiting accept returns errSockClosed.
func (l *sockListener) Close() error {
	l.closed.Store(true)
	return l.f.Close()
}

// dialUnix connects to the socket at path, naming it name in errors. A
// connect that the kernel does not complete at once (it does for Unix
// sockets on Linux) is waited for until ctx ends.
func dialUnix(ctx context.Context, path, name string) (sockConn, error) {
	fd, err := socketFD()
	if err != nil {
		return sockConn{}, os.NewSyscallError("socket", err)
	}
	f := os.NewFile(uintptr(fd), name)
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return sockConn{}, err
	}
	var cerr error
	raw.Control(func(fd uintptr) { cerr = unix.Connect(int(fd), &unix.SockaddrUnix{Name: path}) })
	if cerr == unix.EINPROGRESS || cerr == unix.EALREADY || cerr == unix.EINTR {
		cerr = awaitConnect(ctx, f)
	}
	if cerr != nil {
		f.Close()
		return sockConn{}, os.NewSyscallError("connect", cerr)
	}
	return sockConn{f}, nil
}

// awaitConnect waits until f's connect has completed, or ctx has ended,
// and returns the connect's outcome.
func awaitConnect(ctx context.Context, f *os.File) error {
	if d, ok := ctx.Deadline(); ok {
		f.SetWriteDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { f.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var cerr error
	err = raw.Write(func(fd uintptr) bool {
		n, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
		switch e := unix.Errno(n); {
		case err != nil:
			cerr = err
		case e == unix.EINPROGRESS || e == unix.EALREADY || e == unix.EINTR:
			return false
		case e != 0 && e != unix.EISCONN:
			cerr = e
		}
		return true
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	f.SetWriteDeadline(time.Time{})
	return cerr
}
