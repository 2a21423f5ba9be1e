//go:build unix

package bus

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The raw socket layer keeps what package net gave: descriptors that are
// close-on-exec and non-blocking (served by the poller), deadlines, a
// half-close, a Close that ends a waiting accept, and dial errors that
// say ENOENT and ECONNREFUSED.
func TestSockLayer(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.sock")
	ln, err := listenUnix(path, "s.sock")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	accepted := make(chan sockConn, 1)
	go func() {
		c, err := ln.accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	c, err := dialUnix(ctx, path, "s.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := <-accepted
	defer s.Close()
	for _, f := range []*os.File{ln.f, c.File, s.File} {
		fdFlags, _ := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0)
		flFlags, _ := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
		if fdFlags&unix.FD_CLOEXEC == 0 || flFlags&unix.O_NONBLOCK == 0 {
			t.Errorf("%s: FD flags %#x, status flags %#x; want close-on-exec and non-blocking", f.Name(), fdFlags, flFlags)
		}
	}
	if uid, _, err := peerCred(s); err != nil && !errors.Is(err, errors.ErrUnsupported) || err == nil && uid != os.Geteuid() {
		t.Errorf("peerCred: uid %d, %v; want %d", uid, err, os.Geteuid())
	}

	s.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := s.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read past the deadline: %v; want os.ErrDeadlineExceeded", err)
	}
	s.SetReadDeadline(time.Time{})
	if _, err := c.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(s); string(b) != "hi" || err != nil {
		t.Errorf("read %q, %v; want \"hi\" then EOF", b, err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := ln.accept()
		done <- err
	}()
	// Whether it is waiting yet or not, it ends (Server.Close's tests
	// wait for a serving accept loop to end).
	ln.Close()
	select {
	case err := <-done:
		if !errors.Is(err, errSockClosed) {
			t.Errorf("accept after Close: %v; want errSockClosed", err)
		}
	case <-ctx.Done():
		t.Fatal("Close did not end a waiting accept")
	}

	if _, err := dialUnix(ctx, filepath.Join(dir, "none.sock"), "none.sock"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("dial of no socket: %v; want ENOENT", err)
	}
	if _, err := dialUnix(ctx, path, "s.sock"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial of a closed socket: %v; want ECONNREFUSED", err)
	}
}
