package oslock

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"
)

func TestWaitGone(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid

	// A live process: WaitGone sleeps until its context ends.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	if err := WaitGone(ctx, pid); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitGone on a live process: %v", err)
	}
	if StateOf(pid) != ProcRunning {
		t.Fatalf("state %v", StateOf(pid))
	}

	done := make(chan error, 1)
	go func() { done <- WaitGone(t.Context(), pid) }()
	cmd.Process.Kill() // a zombie until reaped: gone all the same
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitGone did not return within 10s of the kill")
	}
	if StateOf(pid) != ProcGone {
		t.Fatalf("state after kill: %v", StateOf(pid))
	}
}
