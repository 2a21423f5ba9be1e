package etcdtest

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestNetCut checks the test network itself: a member on the bridge is
// reached from a host's namespace and, through its unix socket, from the
// test process; a cut host reaches nothing until it is healed, and nobody
// on the bridge reaches a cut member.
func TestNetCut(t *testing.T) {
	Require(t)
	n, err := NewNet([]string{"A"})
	if errors.Is(err, ErrNoNetns) {
		t.Skipf("no network namespaces here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c, err := Start(Options{Members: 1, Net: n})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Client(t).Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put through the control socket: %v", err)
	}
	reach := func() error {
		// bash's /dev/tcp: a TCP connection from inside the host's
		// namespace, given a second.
		return n.Command("A", "timeout", "1", "bash", "-c", "exec 3<>/dev/tcp/"+memberIP(0)+"/2379").Run()
	}
	if err := reach(); err != nil {
		t.Fatalf("host A does not reach the member at %s: %v", c.Members[0].ClientURL, err)
	}
	if err := n.Cut("A"); err != nil {
		t.Fatal(err)
	}
	if err := reach(); err == nil {
		t.Fatal("host A, cut off, still reaches the member")
	}
	if err := n.Heal("A"); err != nil {
		t.Fatal(err)
	}
	// The first SYN after the heal may have gone out while the link was
	// down: try again, each try bounded, for up to 10s.
	var healed error
	for range 10 {
		if healed = reach(); healed == nil {
			break
		}
	}
	if healed != nil {
		t.Fatalf("host A, healed, does not reach the member: %v", healed)
	}
	// The member cut off: nobody on the bridge reaches it; the test
	// process still does, through its unix socket.
	if err := n.Cut(MemberName(0)); err != nil {
		t.Fatal(err)
	}
	if err := reach(); err == nil {
		t.Fatal("host A still reaches the member cut off")
	}
	if _, err := c.Client(t).Get(ctx, "k"); err != nil {
		t.Fatalf("the member cut off, through its control socket: %v", err)
	}
	if err := n.Heal(MemberName(0)); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if healed = reach(); healed == nil {
			break
		}
	}
	if healed != nil {
		t.Fatalf("host A does not reach the member healed: %v", healed)
	}
}
