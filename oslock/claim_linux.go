package oslock

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

func claimAddr(key string) *unix.SockaddrUnix {
	return &unix.SockaddrUnix{Name: "@" + key}
}

func sysMakeClaim(key string) *Claim {
	// Blocking: nobody ever accepts on it, so the runtime's poller need
	// not know it (registering it and taking it out again cost two
	// system calls a grant).
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	if unix.Bind(fd, claimAddr(key)) != nil || unix.Listen(fd, 4096) != nil {
		unix.Close(fd)
		return nil
	}
	return &Claim{f: os.NewFile(uintptr(fd), "claim")}
}

// sysWaitClaim connects to the key's listener, which never accepts: the
// connection waits in its backlog until the listener's last descriptor
// closes, when the kernel resets it and the read below returns.
func sysWaitClaim(ctx context.Context, key string, ok func(uid int) bool) (bool, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return false, err
	}
	// The descriptor goes to the runtime's poller only once the connect
	// found a claim: the usual refused connect costs no registration.
	switch err := unix.Connect(fd, claimAddr(key)); {
	case err == nil:
	case errors.Is(err, unix.ECONNREFUSED), errors.Is(err, unix.ENOENT):
		unix.Close(fd)
		return false, nil // nobody claims it
	case errors.Is(err, unix.EAGAIN):
		unix.Close(fd)
		// A full backlog: a claim is held. Rare; look again shortly.
		t := time.NewTimer(10 * time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return true, context.Cause(ctx)
		case <-t.C:
		}
		_, err := sysWaitClaim(ctx, key, ok)
		return true, err
	default:
		unix.Close(fd)
		return false, err
	}
	f := os.NewFile(uintptr(fd), "claim")
	defer f.Close()
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil || !ok(int(cred.Uid)) {
		return false, nil // another user's: not a claim of ours
	}
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Now()) })
	defer stop()
	var b [1]byte
	for {
		_, err := f.Read(b[:])
		if ctx.Err() != nil {
			return true, context.Cause(ctx)
		}
		if err == nil {
			continue // nothing is ever written; drop it
		}
		if errors.Is(err, io.EOF) || errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EPIPE) {
			return true, nil
		}
		return true, err
	}
}
