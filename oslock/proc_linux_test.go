package oslock

import (
	"context"
	"errors"
	"os"
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

func TestFlockWaiters(t *testing.T) {
	path := t.TempDir() + "/l"
	holder, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if ok, err := TryLock(holder, true); !ok || err != nil {
		t.Fatal(ok, err)
	}
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("flock(1) not installed")
	}
	cmd := exec.Command(flock, path, "true") // blocks behind holder
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w, err := FlockWaiters()
		if err != nil {
			t.Fatal(err)
		}
		if w[cmd.Process.Pid] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d not listed as waiting within 10s: %v", cmd.Process.Pid, w)
		}
		time.Sleep(2 * time.Millisecond)
	}
	table, err := LockTable()
	if err != nil {
		t.Fatal(err)
	}
	for _, hs := range table {
		for _, h := range hs {
			if h.PID == cmd.Process.Pid {
				t.Fatalf("a blocked waiter is listed as a holder: %+v", h)
			}
		}
	}
}
