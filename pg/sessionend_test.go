package pg

import (
	"context"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
)

// TestPreparedEndSession: a session's end prepared by another Locker (as
// leaderrun's watchdog prepares it) ends the holder's term on the
// connection opened ahead, opening no other, and the waiter is granted
// before the holder's own deadline (a 30 s lease). When the server has ended that
// connection meanwhile (pg_terminate_backend, as idle_session_timeout or
// a restart would), End still ends the session, on a fresh connection.
func TestPreparedEndSession(t *testing.T) {
	srv := sharedServer(t)
	for _, tc := range []struct {
		name       string
		terminated bool
	}{{"prepared", false}, {"terminated", true}} {
		t.Run(tc.name, func(t *testing.T) {
			schema := testSchema(t)
			h := open(t, srv, schema, Config{TTL: 30 * time.Second})
			w := open(t, srv, schema, Config{TTL: 30 * time.Second})
			e := open(t, srv, schema, Config{})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			lead, err := h.Acquire(ctx, "job", elect.Request{Mode: elect.Exclusive})
			if err != nil {
				t.Fatal(err)
			}
			got := acquireAsync(ctx, w, "job", elect.Request{Mode: elect.Exclusive})
			waitQueued(t, h, "job", 1)
			id, err := h.Session(lead)
			if err != nil {
				t.Fatal(err)
			}
			se := e.PrepareEndSession(id)
			defer se.Close()
			select {
			case <-se.ready:
			case <-ctx.Done():
				t.Fatal("the end's connection did not open within 30s")
			}
			if se.c == nil {
				t.Fatal("the end's connection did not open")
			}
			if tc.terminated {
				terminate(t, srv, int(se.c.PgConn().PID()))
			}
			deadline, _, _ := lead.Deadline()
			ended := time.Now()
			if err := se.End(ctx); err != nil {
				t.Fatalf("End: %v", err)
			}
			g := recvGrant(t, got)
			if g.err != nil {
				t.Fatal(g.err)
			}
			defer g.lead.Release()
			if !g.at.Before(deadline) {
				t.Fatalf("the waiter was granted at %v, not before the holder's deadline %v: the lease expired, the session was not ended", g.at, deadline)
			}
			select {
			case <-lead.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("the holder's term did not end within 20s of End")
			}
			e.ends.mu.Lock()
			fresh := e.ends.c != nil
			e.ends.mu.Unlock()
			if fresh != tc.terminated {
				t.Fatalf("End opened a fresh connection: %v; want %v", fresh, tc.terminated)
			}
			t.Logf("granted %v after End", g.at.Sub(ended).Round(time.Microsecond))
		})
	}
}
