//go:build linux

package pgcmd_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/pg"
	"github.com/leaderrun/leaderrun/pg/internal/pgtest"
)

// TestDeadHolderEnded: the leading wrapper on host A is SIGKILLed (its
// watchdog too in the second case, with its COMMAND left running and
// another wrapper waiting on host A). The waiter on host B starts within
// 30 s although the lease lasts 60 s, so the term was ended, not expired
// (by A's watchdog, or by the waiter on A that saw A's wrapper die and
// fenced its COMMAND); and A's COMMAND was gone by then. In the third
// case the server ended, before the SIGKILL, the connection A's watchdog
// opened ahead to end the term: the watchdog ends it on a fresh one. In
// the last two, A's watchdog (or the waiter on A, the watchdog killed with
// the wrapper) is SIGKILLed once it did the first of ending the term and
// removing its marker: that must be the end, or nothing ends the term.
func TestDeadHolderEnded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and leaderrun-pg processes")
	}
	srv := pgtest.StartT(t)
	bin := cliBinary(t)
	url := srv.URL()
	lk, err := pg.Open(pg.Config{URL: url, Schema: "bench"})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	admin, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	w := pgWrapper(bin, url, "bench", "60s", queuedIn(lk), admin)
	for _, tc := range []struct {
		name string
		kill victims
	}{{"watchdog", wrapperOnly}, {"local-waiter", wrapperAndWatchdog}, {"end-conn-gone", wrapperEndConnGone},
		{"watchdog-halfway", watchdogHalfway}, {"local-waiter-halfway", localWaiterHalfway}} {
		t.Run(tc.name, func(t *testing.T) {
			gap, overlap := failoverOnce(t, admin, w, tc.kill, "dead-"+tc.name)
			if overlap {
				t.Fatal("A's COMMAND still ran when B's started")
			}
			t.Logf("B's COMMAND started %v after the SIGKILL", gap)
		})
	}
}
