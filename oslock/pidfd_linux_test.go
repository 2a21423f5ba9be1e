package oslock

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"
)

// TestWaitPidfd: the wait ends once the process has exited (unreaped:
// a zombie is gone), and with ctx while it runs.
func TestWaitPidfd(t *testing.T) {
	c := exec.Command("sleep", "60")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.Process.Kill()
		c.Wait()
	}()
	f, err := OpenPidfd(c.Process.Pid)
	if err != nil {
		t.Skipf("no pidfd here: %v", err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	err = WaitPidfd(ctx, f)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitPidfd on a running process = %v, want the deadline", err)
	}
	c.Process.Kill()
	ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := WaitPidfd(ctx, f); err != nil {
		t.Fatalf("WaitPidfd after SIGKILL = %v", err)
	}
	if s := StateOf(c.Process.Pid); s != ProcGone {
		t.Errorf("WaitPidfd returned while the process is %v", s)
	}
}
