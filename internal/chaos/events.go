package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
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
