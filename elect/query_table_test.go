package elect

import (
	"context"
	"testing"

	"github.com/leaderrun/leaderrun/oslock"
)

// A holder's ticket that the first reading of /proc/locks missed (the
// kernel gives the table a page per read, and skips an entry when locks
// ahead of it go between two reads) is still the holder, not an outside
// holder of the lock file: Query reads the table again before it calls a
// ticket dead. status and who said "not leaderrun" of a leaderrun holder
// under lock churn before.
func TestQueryTableSkippedTicket(t *testing.T) {
	if _, err := oslock.LockTable(); err != nil {
		t.Skipf("no lock table here: %v", err)
	}
	l, _ := testLocker(t)
	ctx := context.Background()
	ld, err := l.Acquire(ctx, "skip", Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Release()

	real := lockTable
	t.Cleanup(func() { lockTable = real })
	first := true
	lockTable = func() (map[oslock.FileID][]oslock.LockHolder, error) {
		table, err := real()
		if err != nil || !first {
			return table, err
		}
		first = false
		// The first reading skips every lock but the lock file's.
		d, derr := l.current()
		if derr != nil {
			t.Fatal(derr)
		}
		id, _, lerr := d.Lstat("skip" + lockSuffix)
		if lerr != nil {
			t.Fatal(lerr)
		}
		return map[oslock.FileID][]oslock.LockHolder{id: table[id]}, nil
	}
	snap, err := l.Query(ctx, "skip")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Held) != 1 || snap.Held[0].External || snap.Held[0].Epoch != ld.Epoch() {
		t.Fatalf("holder = %+v, want the one leaderrun holder with epoch %d", snap.Held, ld.Epoch())
	}
}
