package chaos

import (
	"os/exec"
	"sync"
	"syscall"
	"testing"
)

// TestEventsBetween checks the window (from, to], the merge of extra
// events in time order and the relative times.
func TestEventsBetween(t *testing.T) {
	var e Events
	e.list = []Event{{100, "too early"}, {2_000_000_000, "start"}, {2_500_000_000, "kill"}, {4_000_000_000, "too late"}}
	got := e.Between(1_000_000_000, 3_000_000_000, Event{2_250_000_000, "exit"}, Event{3_000_000_000, "at the end"})
	want := "-1.000s start; -0.750s exit; -0.500s kill; +0.000s at the end"
	if got != want {
		t.Errorf("Between = %q, want %q", got, want)
	}
}

// TestReap checks that Reap passes the exit status on, and that Closed
// tells a closed channel from an open one.
func TestReap(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exit 3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	exited := make(chan struct{})
	var status syscall.WaitStatus
	Reap(&wg, cmd, func(st syscall.WaitStatus, err error, ns int64) {
		status = st
		close(exited)
	})
	wg.Wait()
	if !Closed(exited) || status.ExitStatus() != 3 {
		t.Errorf("after Reap: closed %v, exit status %d; want closed, 3", Closed(exited), status.ExitStatus())
	}
	if Closed(make(chan struct{})) {
		t.Error("Closed reports an open channel closed")
	}
}
