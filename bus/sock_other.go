//go:build !unix

package bus

import (
	"context"
	"errors"
	"net"
)

// sockConn is package net's Unix socket where there is no raw one.
type sockConn struct{ *net.UnixConn }

// sockListener is package net's listener, never unlinking the path.
type sockListener struct{ ln *net.UnixListener }

func listenUnix(path, name string) (*sockListener, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	return &sockListener{ln}, nil
}

func (l *sockListener) accept() (sockConn, error) {
	uc, err := l.ln.AcceptUnix()
	if errors.Is(err, net.ErrClosed) {
		err = errSockClosed
	}
	return sockConn{uc}, err
}

func (l *sockListener) Close() error { return l.ln.Close() }

func dialUnix(ctx context.Context, path, name string) (sockConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return sockConn{}, err
	}
	return sockConn{nc.(*net.UnixConn)}, nil
}
