package oslock

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// TestStatField: fields are counted as proc(5) counts them, after a
// command name that holds parentheses and spaces; StatNumber reads this
// process's parent, process group and start time so.
func TestStatField(t *testing.T) {
	st := []byte("42 (a) b) c) S 1 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0\n")
	for n, want := range map[int]string{3: "S", 4: "1", 9: "4194560", 22: "12345", 24: "0", 25: ""} {
		if got := string(StatField(st, n)); got != want {
			t.Errorf("StatField(%d) = %q, want %q", n, got, want)
		}
	}
	if got := StatField([]byte("42 no parentheses S 1"), 3); got != nil {
		t.Errorf("StatField of a line without the command name = %q, want nil", got)
	}
	if ppid, ok := StatNumber(os.Getpid(), 4); !ok || int(ppid) != os.Getppid() {
		t.Errorf("StatNumber(self, 4) = %d, %v; want the parent %d", ppid, ok, os.Getppid())
	}
	if pgrp, ok := StatNumber(os.Getpid(), 5); !ok || int(pgrp) != unix.Getpgrp() {
		t.Errorf("StatNumber(self, 5) = %d, %v; want the process group %d", pgrp, ok, unix.Getpgrp())
	}
	if start, ok := StatNumber(os.Getpid(), 22); !ok || start == 0 {
		t.Errorf("StatNumber(self, 22) = %d, %v; want a start time", start, ok)
	}
	if _, ok := StatNumber(os.Getpid(), 2); ok {
		t.Errorf("StatNumber(self, 2), the command name, is a number")
	}
}
