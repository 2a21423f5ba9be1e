package pg

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/proctest"
	"github.com/leaderrun/leaderrun/pg/internal/pgtest"
)

// netns is a network namespace made by a test, joined to this one by a
// veth pair: hostAddr on this side, nsAddr inside.
type netns struct {
	name, link       string
	hostAddr, nsAddr string
}

func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func makeNetns(t *testing.T) *netns {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("making a network namespace needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip (iproute2) not installed")
	}
	n := os.Getpid() % 200
	ns := &netns{name: fmt.Sprintf("lrpgtest%d", os.Getpid()), link: fmt.Sprintf("lrpg%d", os.Getpid()%100000),
		hostAddr: fmt.Sprintf("10.231.%d.1", n), nsAddr: fmt.Sprintf("10.231.%d.2", n)}
	ip(t, "netns", "add", ns.name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns.name).Run() })
	ip(t, "link", "add", ns.link+"a", "type", "veth", "peer", "name", ns.link+"b")
	t.Cleanup(func() { exec.Command("ip", "link", "del", ns.link+"a").Run() })
	ip(t, "link", "set", ns.link+"b", "netns", ns.name)
	ip(t, "addr", "add", ns.hostAddr+"/24", "dev", ns.link+"a")
	ip(t, "link", "set", ns.link+"a", "up")
	ip(t, "netns", "exec", ns.name, "ip", "addr", "add", ns.nsAddr+"/24", "dev", ns.link+"b")
	ip(t, "netns", "exec", ns.name, "ip", "link", "set", ns.link+"b", "up")
	ip(t, "netns", "exec", ns.name, "ip", "link", "set", "lo", "up")
	return ns
}

// partition cuts the link (no RST, no FIN: every connection across it is
// left half-open), heal restores it.
func (ns *netns) partition(t *testing.T) { ip(t, "link", "set", ns.link+"a", "down") }
func (ns *netns) heal(t *testing.T)      { ip(t, "link", "set", ns.link+"a", "up") }

// TestPartitionedHolder: the holder runs on a "host" in a network
// namespace; the link is cut, so its connections are left half-open and
// nothing tells the server or the holder. The holder's term ends by its
// own clock; the waiter on this side is granted only after that (the
// server ends the holder's idle connection at the TTL, and the waiter
// waits for the lease to expire by the server's clock), within a TTL and
// a second of the cut. Healed, the host takes part again.
func TestPartitionedHolder(t *testing.T) {
	ns := makeNetns(t)
	srv := pgtest.StartT(t) // restarted to listen on the link: not the shared one
	if err := srv.ListenOn(ns.hostAddr, ns.hostAddr+"/24"); err != nil {
		t.Fatal(err)
	}
	schema := testSchema(t)
	const ttl = 4 * time.Second
	inNS := func(name string) *proctest.Proc {
		c := exec.Command("ip", "netns", "exec", ns.name, os.Args[0], "-test.run=^$", "-test.bench=^$")
		c.Env = append(os.Environ(), proctest.RoleEnv+"=contender", "LR_URL="+srv.URLAt(ns.hostAddr), "LR_SCHEMA="+schema,
			"LR_NAME=pt", fmt.Sprintf("LR_TTL=%v", ttl))
		return proctest.Start(t, name, c, proctest.Options{})
	}
	h := inNS("holder")
	h.Expect("leader ")
	w := open(t, srv, schema, Config{TTL: ttl})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	g := acquireAsync(ctx, w, "pt", elect.Request{})
	waitQueued(t, w, "pt", 1)
	cut := time.Now()
	ns.partition(t)
	line := h.Expect("lost ")
	f := strings.Fields(line)
	ns64, _ := strconv.ParseInt(f[1], 10, 64)
	lost := time.Unix(0, ns64)
	if d := lost.Sub(cut); d > ttl {
		t.Fatalf("the cut-off holder's term ended %v after the cut, beyond the TTL %v", d, ttl)
	}
	r := recvGrant(t, g)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.at.After(lost) {
		t.Fatalf("two holders: the waiter was granted %v before the cut-off holder's term ended", lost.Sub(r.at))
	}
	if d := r.at.Sub(cut); d > ttl+time.Second {
		t.Fatalf("granted %v after the cut, beyond TTL + 1s", d)
	}
	t.Logf("cut-off holder's term ended %v after the cut (%s); the waiter was granted %v after the cut, %v after that",
		lost.Sub(cut).Round(time.Millisecond), strings.Join(f[2:], " "), r.at.Sub(cut).Round(time.Millisecond), r.at.Sub(lost).Round(time.Millisecond))
	ns.heal(t)
	h2 := inNS("rejoined")
	h2.Expect("queued")
	r.lead.Release()
	h2.Expect("leader ")
}
