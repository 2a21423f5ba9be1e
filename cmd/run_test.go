//go:build unix

package cmd

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
)

// stuckLocker's Acquire returns only when release is closed, whatever
// its ctx: a request stuck in a system call.
type stuckLocker struct {
	dir     string
	entered chan struct{}
	release chan struct{}
}

func (l *stuckLocker) Dir() string  { return l.dir }
func (l *stuckLocker) Close() error { return nil }
func (l *stuckLocker) Acquire(context.Context, string, elect.Request) (*elect.Leadership, error) {
	close(l.entered)
	<-l.release
	return nil, context.Canceled
}
func (l *stuckLocker) Query(context.Context, string) (elect.Snapshot, error) {
	return elect.Snapshot{}, nil
}
func (l *stuckLocker) QueryAll(context.Context) (elect.Snapshot, error) {
	return elect.Snapshot{}, nil
}

// A signal while waiting in line ends leaderrun with 128+N even when the
// request does not end.
func TestSignalEndsStuckAcquire(t *testing.T) {
	lk := &stuckLocker{dir: t.TempDir(), entered: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { close(lk.release) })
	o := &runOptions{argv: []string{"true"}, name: "stuck", grace: time.Second,
		open: func() (*opened, error) { return openBackend(lk, elect.Config{}) }}
	ret := make(chan error, 1)
	go func() { ret <- o.run(context.Background()) }()
	select {
	case <-lk.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire was not called")
	}
	// run has registered for SIGTERM before it asks for the lock.
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ret:
		if code := ExitCode(err); code != ExitSignalBase+int(syscall.SIGTERM) {
			t.Errorf("exit %d (%v), want %d", code, err, ExitSignalBase+int(syscall.SIGTERM))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("leaderrun still waits 10s after SIGTERM")
	}
}
