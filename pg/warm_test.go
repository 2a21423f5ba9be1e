package pg

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/elect"
)

// TestWarmUp: a request that waits readies its session's backend ahead:
// before its first wake-up, the statements of evaluate and leave are
// prepared on it (so the wake-up's evaluate and the release are one round
// trip each), and no row of the warm-up (a session, requests, a name's
// epoch) is left for anyone to see. The waiter is then granted as usual.
func TestWarmUp(t *testing.T) {
	srv := sharedServer(t)
	schema := testSchema(t)
	h := open(t, srv, schema, Config{})
	w := open(t, srv, schema, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lead, err := h.Acquire(ctx, "job", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	got := acquireAsync(ctx, w, "job", elect.Request{})
	waitQueued(t, h, "job", 1)
	w.mu.Lock()
	s := w.sess
	w.mu.Unlock()
	prepared := func(sql string) bool {
		var n int
		err := s.do(func(c context.Context, conn *pgx.Conn) error {
			return conn.QueryRow(c, "SELECT count(*) FROM pg_prepared_statements WHERE statement = $1", sql).Scan(&n)
		})
		return err == nil && n == 1
	}
	for !prepared(w.evaluateSQL()) || !prepared(w.leaveSQL()) || !prepared(w.lingerSQL()) {
		if ctx.Err() != nil {
			t.Fatal("the waiting session's backend has not prepared evaluate, leave and the read of a holder whose connection went within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var left int
	err = srv.Super(t).QueryRow(ctx, `SELECT (SELECT count(*) FROM `+w.q+`.requests WHERE name LIKE 'leaderrun warm-up%')
		+ (SELECT count(*) FROM `+w.q+`.sessions WHERE pid = 0)
		+ (SELECT count(*) FROM `+w.q+`.epochs WHERE name LIKE 'leaderrun warm-up%')`).Scan(&left)
	if err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d rows of the warm-up are left", left)
	}
	lead.Release()
	if g := recvGrant(t, got); g.err != nil {
		t.Fatal(g.err)
	} else {
		g.lead.Release()
	}
}

// TestWarmEnds: a request that waits opens its Locker's connection for
// ends of sessions ahead and readies it (end_session prepared), so that
// ending the holder's term, should it die on this host (EndHolder), is
// one round trip on an open connection.
func TestWarmEnds(t *testing.T) {
	_, w, lead, _ := heldAndWaited(t, "job")
	defer lead.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		w.ends.mu.Lock()
		c := w.ends.c
		w.ends.mu.Unlock()
		if c != nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the waiting Locker did not open its connection for ends of sessions within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var n int
	err := w.withEnds(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, "SELECT count(*) FROM pg_prepared_statements WHERE statement = $1", w.endSessionSQL()).Scan(&n)
	})
	if err != nil || n != 1 {
		t.Fatalf("end_session prepared on the connection: %d, %v; want 1", n, err)
	}
}
