package remote

import (
	"testing"
	"time"
)

// TestDeadline: the deadline moves only later, tells each move, and
// never moves once it has passed.
func TestDeadline(t *testing.T) {
	var d Deadline
	now := time.Now()
	d.Start(now.Add(time.Hour))
	at, moved := d.Moves()
	d.Extend(now.Add(time.Minute)) // earlier: no move
	if d.At() != at {
		t.Fatalf("moved back to %v", d.At())
	}
	select {
	case <-moved:
		t.Fatal("told of a move that did not happen")
	default:
	}
	d.Extend(now.Add(2 * time.Hour))
	select {
	case <-moved:
	default:
		t.Fatal("a move was not told")
	}
	if !d.At().Equal(now.Add(2*time.Hour)) || d.Passed() {
		t.Fatalf("at %v, passed %v", d.At(), d.Passed())
	}
	var p Deadline
	p.Start(now.Add(-time.Millisecond))
	p.Extend(now.Add(time.Hour)) // a renewal answered after the deadline
	if !p.Passed() {
		t.Fatal("a passed deadline moved")
	}
}
