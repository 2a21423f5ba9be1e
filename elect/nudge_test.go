package elect

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/oslock"
)

// TestLineRunsPastNewHolder: a release that looks at the line after its
// successor was granted (the successor woke on the beacon's hang-up and
// wrote its grant before the look) still sees the usual line, and so does
// not list the whole queue, also when the next ticket has come and gone
// meanwhile; anything unusual is left to the listing.
func TestLineRunsPastNewHolder(t *testing.T) {
	d := testDir(t)
	q, err := d.Sub("n"+queueSuffix, true, oslock.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	put := func(n uint64, epoch uint64) {
		t.Helper()
		b, err := appendRecord(nil, &record{PID: os.Getpid(), Mode: Exclusive, Since: time.Now(), Epoch: epoch})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(q.Path(), ticketName(n, false)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Released: 1. The next holder 2, granted; waiting: 3 and 4, running.
	put(2, 42)
	put(3, 0)
	put(4, 0)
	if !lineRuns(q, 1) {
		t.Error("a granted successor and two running waiters: not the usual line")
	}
	// Released: 2. Waiting: 3 and 4, running.
	if !lineRuns(q, 2) {
		t.Error("two running waiters next: not the usual line")
	}
	// Released: 0, and 1 came and went before the release looked.
	if !lineRuns(q, 0) {
		t.Error("the next ticket gone already: not the usual line")
	}
	// One waiter only behind the holder.
	if lineRuns(q, 3) {
		t.Error("one waiter left: taken for the usual line")
	}
	// Two holders (shared, or a deposed one): left to the listing.
	put(3, 43)
	if lineRuns(q, 1) {
		t.Error("two granted tickets: taken for the usual line")
	}
}
