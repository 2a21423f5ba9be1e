package instance

import (
	"context"
	"testing"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

// TestPartsPerConnection: a submit sent in parts is joined per connection:
// a retry of the same id on another connection starts afresh rather than
// appending to what a dropped connection left, and the parts of a
// connection that ends are forgotten.
func TestPartsPerConnection(t *testing.T) {
	p := newPrimary(nil)
	c1, end1 := context.WithCancel(context.Background())
	c2, end2 := context.WithCancel(context.Background())
	defer end2()
	if b, err := p.part(c1, wireRequest{Op: opPart, ID: "x", Data: []byte("stale")}); b != nil || err != nil {
		t.Fatalf("first part: %q, %v", b, err)
	}
	if b, err := p.part(c2, wireRequest{Op: opPart, ID: "x", Data: []byte("fr")}); b != nil || err != nil {
		t.Fatalf("retry's first part: %q, %v", b, err)
	}
	b, err := p.part(c2, wireRequest{Op: opPart, ID: "x", Data: []byte("esh"), EOF: true})
	if err != nil || string(b) != "fresh" {
		t.Fatalf("joined %q, %v; want the retry's parts only", b, err)
	}
	if _, err := p.part(c1, wireRequest{Op: opPart, ID: "y", Data: []byte("left")}); err != nil {
		t.Fatal(err)
	}
	end1()
	// AfterFunc runs in a goroutine of its own.
	proctest.Eventually(t, "the ended connection's parts forgotten", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.partsLen == 0 && len(p.parts) == 0
	})
	big := make([]byte, maxSubmit+1)
	if _, err := p.part(c2, wireRequest{Op: opPart, ID: "z", Data: big}); err == nil {
		t.Fatal("a submit over maxSubmit was taken")
	}
}
