package pg

import (
	"context"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/pg/internal/pgtest"
)

// TestStandbyPromoted: the primary dies (SIGKILL) under a holder and a
// standby is promoted. The holder cannot renew and its term ends by its
// own clock; a contender on the new primary, where the holder's grant
// replicated, is granted only once the holder's lease has expired there
// (after the holder's term ended), with a higher epoch. Asynchronous
// replication, whose lost commits the package doc discusses, loses
// nothing here because the grant was replicated before the kill (the
// test waits for the standby to replay it).
func TestStandbyPromoted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	primary := pgtest.StartT(t)
	standby, err := primary.Standby()
	if err != nil {
		t.Skip("no standby on this machine: ", err)
	}
	t.Cleanup(standby.Close)
	schema := testSchema(t)
	const ttl = 4 * time.Second
	h := open(t, primary, schema, Config{TTL: ttl})
	ctx := t.Context()
	lh, err := h.Acquire(ctx, "sp", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the standby has replayed the grant.
	sc := standby.Super(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		err := sc.QueryRow(ctx, "SELECT count(*) FROM "+schema+".requests WHERE epoch = $1", int64(lh.Epoch())).Scan(&n)
		if err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby did not replay the grant within 20s: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	dl, _, _ := lh.Deadline()
	killed := time.Now()
	primary.Kill()
	if _, err := sc.Exec(ctx, "SELECT pg_promote()"); err != nil {
		t.Fatal(err)
	}
	w := open(t, standby, schema, Config{TTL: ttl})
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	lw, err := w.Acquire(actx, "sp", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	defer lw.Release()
	select {
	case <-lh.Done():
	default:
		t.Fatalf("two holders: granted on the new primary %v after the kill while the old holder's term runs", granted.Sub(killed))
	}
	if granted.Before(dl) {
		t.Fatalf("two holders: granted on the new primary %v before the old holder's deadline", dl.Sub(granted))
	}
	if lw.Epoch() <= lh.Epoch() {
		t.Fatalf("epoch %d on the new primary after %d", lw.Epoch(), lh.Epoch())
	}
	t.Logf("granted on the promoted standby %v after the primary was killed (TTL %v); the old term ended with %v", granted.Sub(killed).Round(time.Millisecond), ttl, lh.Err())
}
