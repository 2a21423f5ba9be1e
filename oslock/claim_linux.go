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

// sysWaitClaim connects to the key's listener, which never accepts: the
// connection waits in its backlog until the listener's last descriptor
// closes, when the kernel resets it and the read below returns.
func sysWaitClaim(ctx context.Context, key string, ok func(uid int) bool) (bool, error) {
	held, _, err := waitClaim(ctx, key, ok)
	return held, err
}

// sysTakeClaim binds the key, waiting for each claim of ours that holds
// it first; a key squatted by another user, or a platform or sandbox
// without claims, gives nil.
func sysTakeClaim(ctx context.Context, key string, ok func(uid int) bool) (*Claim, error) {
	refused := 0
	for {
		// Blocking: nobody ever accepts on it, so the runtime's poller
		// need not know it.
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, nil
		}
		err = unix.Bind(fd, claimAddr(key))
		if err == nil {
			if unix.Listen(fd, 4096) != nil {
				unix.Close(fd)
				return nil, nil
			}
			return &Claim{f: os.NewFile(uintptr(fd), "claim")}, nil
		}
		unix.Close(fd)
		if !errors.Is(err, unix.EADDRINUSE) {
			return nil, nil
		}
		// Held: by a holder of ours, whose end we wait for, or by
		// another user, which we cannot wait out. A claim that went
		// between the bind and the connect is bound again; a key that
		// stays bound and refuses connections (bound by somebody who
		// does not listen) is taken as squatted.
		held, foreign, err := waitClaim(ctx, key, ok)
		if err != nil || foreign {
			return nil, err
		}
		if held {
			refused = 0
			continue
		}
		if refused++; refused > 5 {
			return nil, nil
		}
		t := time.NewTimer(time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		case <-t.C:
		}
	}
}

// waitClaim is sysWaitClaim, which also tells a claim of another user
// (foreign) from none.
func waitClaim(ctx context.Context, key string, ok func(uid int) bool) (held, foreign bool, err error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return false, false, err
	}
	// The descriptor goes to the runtime's poller only once the connect
	// found a claim: the usual refused connect costs no registration.
	switch err := unix.Connect(fd, claimAddr(key)); {
	case err == nil:
	case errors.Is(err, unix.ECONNREFUSED), errors.Is(err, unix.ENOENT):
		unix.Close(fd)
		return false, false, nil // nobody claims it
	case errors.Is(err, unix.EAGAIN):
		unix.Close(fd)
		// A full backlog: a claim is held. Rare; look again shortly.
		t := time.NewTimer(10 * time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return true, false, context.Cause(ctx)
		case <-t.C:
		}
		_, foreign, err := waitClaim(ctx, key, ok)
		return true, foreign, err
	default:
		unix.Close(fd)
		return false, false, err
	}
	f := os.NewFile(uintptr(fd), "claim")
	defer f.Close()
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil || !ok(int(cred.Uid)) {
		return false, true, nil // another user's (or unverifiable): not a claim of ours
	}
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Now()) })
	defer stop()
	var b [1]byte
	for {
		_, err := f.Read(b[:])
		if ctx.Err() != nil {
			return true, false, context.Cause(ctx)
		}
		if err == nil {
			continue // nothing is ever written; drop it
		}
		if errors.Is(err, io.EOF) || errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EPIPE) {
			return true, false, nil
		}
		return true, false, err
	}
}
