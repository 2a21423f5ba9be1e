package chaos

import (
	"cmp"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Event is something a suite's orchestrator did or saw, at Nanos (unix
// ns), for the message of a violation.
type Event struct {
	Nanos int64
	What  string
}

// Events records a run's events. Only the test goroutine uses it.
type Events struct{ list []Event }

// Add records an event now.
func (e *Events) Add(format string, args ...any) {
	e.list = append(e.list, Event{time.Now().UnixNano(), fmt.Sprintf(format, args...)})
}

// List returns the events recorded, in order.
func (e *Events) List() []Event { return e.list }

// Between says the events in (from, to], with extra ones (such as the
// wrappers' exits) merged in time order, each with its time relative to
// to: "-0.123s what; ...".
func (e *Events) Between(from, to int64, extra ...Event) string {
	events := append(slices.Clone(e.list), extra...)
	slices.SortStableFunc(events, func(a, b Event) int { return cmp.Compare(a.Nanos, b.Nanos) })
	var s []string
	for _, ev := range events {
		if ev.Nanos <= to && ev.Nanos > from {
			s = append(s, fmt.Sprintf("%+.3fs %s", float64(ev.Nanos-to)/1e9, ev.What))
		}
	}
	return strings.Join(s, "; ")
}

// Reap waits for cmd, started, in a goroutine counted by wg, and passes
// its wait status, Wait's error and the time it was reaped (unix ns) to
// exited.
func Reap(wg *sync.WaitGroup, cmd *exec.Cmd, exited func(status syscall.WaitStatus, err error, ns int64)) {
	wg.Go(func() {
		err := cmd.Wait()
		var status syscall.WaitStatus
		if ps := cmd.ProcessState; ps != nil {
			status, _ = ps.Sys().(syscall.WaitStatus)
		}
		exited(status, err, time.Now().UnixNano())
	})
}

// Closed reports whether ch is closed (without blocking).
func Closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
