package etcd

import (
	"errors"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/elect"
)

// TestStrayKeysIgnored: keys under a name's q/, steal/ and held/ that
// leaderrun did not write (another application's, a typo, an old
// version's), older than every request, block nobody: a request is
// granted at once, -n succeeds, the queue hands over, shared requests
// batch, a steal goes through; Query shows none of them and Ignored
// lists them all. Before, the first one made the name wait for ever (-n:
// busy).
func TestStrayKeysIgnored(t *testing.T) {
	c := sharedCluster(t)
	cli := c.Client(t)
	ctx := testCtx(t)
	pfx := testPrefix(t)
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	strays := []string{
		pfx + "job/q/foo",
		pfx + "job/q/x/not-an-id",
		pfx + "job/q/s/0000000000000001-1", // an id, but no lease of that number
		pfx + "job/steal/other-app",
		pfx + "job/held/leftover",
	}
	for i, k := range strays {
		var opts []clientv3.OpOption
		if i%2 == 0 {
			opts = append(opts, clientv3.WithLease(lease.ID))
		}
		if _, err := cli.Put(ctx, k, `{"mode":"exclusive","pid":1}`, opts...); err != nil {
			t.Fatal(err)
		}
	}
	a := open(t, c, pfx, Config{Host: "a"})
	b := open(t, c, pfx, Config{Host: "b"})
	d := open(t, c, pfx, Config{Host: "d"})

	got := answer(t, async(ctx, a, "job", elect.Request{}), 10*time.Second, "a request behind strays")
	if got.err != nil {
		t.Fatal(got.err)
	}
	if _, ok, err := b.TryAcquire(ctx, "job", elect.Exclusive); ok || err != nil {
		t.Fatalf("-n while a holds: ok %v err %v, want busy", ok, err)
	}
	snap, err := a.Query(ctx, "job")
	if err != nil || len(snap.Held) != 1 || len(snap.Pending) != 0 {
		t.Fatalf("Query shows strays: %+v %v", snap, err)
	}
	ign, err := a.Ignored(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ign)
	want := slices.Clone(strays)
	slices.Sort(want)
	if !slices.Equal(ign, want) {
		t.Fatalf("Ignored = %q, want %q", ign, want)
	}
	if all, err := a.Ignored(ctx, ""); err != nil || len(all) != len(strays) {
		t.Fatalf("Ignored of every name = %q, %v", all, err)
	}
	// The queue hands over past them.
	w := async(ctx, b, "job", elect.Request{})
	queuedN(t, a, "job", 1)
	got.lead.Release()
	got = answer(t, w, 10*time.Second, "the waiter behind a holder, with strays ahead")
	if got.err != nil {
		t.Fatal(got.err)
	}
	got.lead.Release()
	// -n on a free name.
	lead, ok, err := d.TryAcquire(ctx, "job", elect.Exclusive)
	if !ok || err != nil {
		t.Fatalf("-n on a name with only strays: ok %v err %v", ok, err)
	}
	// A steal goes through, past the stray grant marker.
	sw := async(ctx, a, "job", elect.Request{Steal: true})
	select {
	case <-lead.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder was not told of the steal")
	}
	if !errors.Is(lead.Err(), elect.ErrStolen) {
		t.Fatalf("the holder after a steal: %v", lead.Err())
	}
	lead.Release()
	steal := answer(t, sw, 10*time.Second, "a steal")
	if steal.err != nil {
		t.Fatal(steal.err)
	}
	steal.lead.Release()
	// Shared requests are granted together.
	s1 := answer(t, async(ctx, a, "job", elect.Request{Mode: elect.Shared}), 10*time.Second, "shared 1")
	s2 := answer(t, async(ctx, b, "job", elect.Request{Mode: elect.Shared}), 10*time.Second, "shared 2")
	if s1.err != nil || s2.err != nil {
		t.Fatal(s1.err, s2.err)
	}
	s1.lead.Release()
	s2.lead.Release()
}
