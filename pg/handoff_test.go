package pg

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/elect"
)

// session is l's live session, for tests that hold its connection.
func liveSession(t *testing.T, l *Locker) *session {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess == nil {
		t.Fatal("no session")
	}
	return l.sess
}

// heldAndWaited opens two Lockers (TTL 20s) in a schema of its own: h
// holds name (lh), w waits for it, its grant to come on g.
func heldAndWaited(t *testing.T, name string) (h, w *Locker, lh *elect.Leadership, g <-chan grant) {
	t.Helper()
	srv := sharedServer(t)
	schema := testSchema(t)
	h, w = open(t, srv, schema, Config{TTL: 20 * time.Second}), open(t, srv, schema, Config{TTL: 20 * time.Second})
	lh, err := h.Acquire(t.Context(), name, elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	g = acquireAsync(t.Context(), w, name, elect.Request{})
	waitQueued(t, h, name, 1)
	return h, w, lh, g
}

// TestHandoffInRelease: a release grants the waiter behind it in the
// releasing transaction, and the waiter holds on the notification alone:
// it is granted while its session's connection can run no statement.
func TestHandoffInRelease(t *testing.T) {
	h, w, lh, g := heldAndWaited(t, "hr")
	s := liveSession(t, w)
	s.cmu.Lock() // no statement of w's session from here
	lh.Release()
	select {
	case r := <-g:
		s.cmu.Unlock()
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.lead.Epoch() <= lh.Epoch() {
			t.Fatalf("epoch %d after %d", r.lead.Epoch(), lh.Epoch())
		}
		snap := waitQueued(t, h, "hr", 0)
		if len(snap.Held) != 1 || snap.Held[0].Epoch != r.lead.Epoch() {
			t.Fatalf("held %+v, want the waiter's term, epoch %d", snap.Held, r.lead.Epoch())
		}
		r.lead.Release()
	case <-time.After(5 * time.Second):
		s.cmu.Unlock()
		t.Fatal("the waiter was not granted by the release: it needed a statement of its own")
	}
}

// TestHandoffDuringEvaluate: the end of the holder's connection wakes
// the waiter, whose evaluate cannot run (its connection is held here);
// the holder's session is then ended from elsewhere, as a watchdog does,
// and the waiter holds on the grant told with the notification without
// waiting for its evaluate.
func TestHandoffDuringEvaluate(t *testing.T) {
	h, w, lh, g := heldAndWaited(t, "hd")
	sid, err := h.Session(lh)
	if err != nil {
		t.Fatal(err)
	}
	s := liveSession(t, w)
	s.cmu.Lock()
	terminate(t, sharedServer(t), backendPID(t, h))
	// w's watch of h's connection fires: w reads the holder's lease, and
	// its read waits for the connection held here.
	if !watchEnded(w, sid, 10*time.Second) {
		s.cmu.Unlock()
		t.Fatal("w's watch of the holder's connection did not fire within 10s")
	}
	if err := w.EndSession(t.Context(), sid); err != nil {
		s.cmu.Unlock()
		t.Fatal(err)
	}
	select {
	case r := <-g:
		s.cmu.Unlock()
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.lead.Release()
	case <-time.After(5 * time.Second):
		s.cmu.Unlock()
		t.Fatal("the waiter was not granted while its evaluate waited")
	}
	lh.Release()
}

// TestHandoffNotToGone: a waiter whose session's connection is gone is
// never handed the name, and the one behind it is granted at once, not
// a TTL later.
func TestHandoffNotToGone(t *testing.T) {
	srv := sharedServer(t)
	schema := testSchema(t)
	const ttl = 20 * time.Second
	h, d, w := open(t, srv, schema, Config{TTL: ttl}), open(t, srv, schema, Config{TTL: ttl}), open(t, srv, schema, Config{TTL: ttl})
	ctx := t.Context()
	lh, err := h.Acquire(ctx, "hg", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gd := acquireAsync(dctx, d, "hg", elect.Request{})
	waitQueued(t, h, "hg", 1)
	gw := acquireAsync(ctx, w, "hg", elect.Request{})
	waitQueued(t, h, "hg", 2)
	// d's session connection goes; d does not know yet (its statements
	// are held here), so its row stays, waiting.
	s := liveSession(t, d)
	s.cmu.Lock()
	pid := int(s.conn.PgConn().PID())
	terminate(t, srv, pid)
	waitNoBackend(t, h, "pid = $1", pid)
	lh.Release()
	r := recvGrant(t, gw)
	s.cmu.Unlock()
	if r.err != nil {
		t.Fatal(r.err)
	}
	if rd := recvGrant(t, gd); rd.err == nil {
		t.Fatal("the waiter whose connection was gone was granted")
	}
	r.lead.Release()
}

// TestHandoffCommitsSynchronously: an end of a session that hands the name
// on commits synchronously whatever its connection says (a watchdog's
// end asks for synchronous_commit=off): the grant must survive a crash.
func TestHandoffCommitsSynchronously(t *testing.T) {
	h, _, lh, _ := heldAndWaited(t, "hs")
	defer lh.Release()
	sid, err := h.Session(lh)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	c, err := h.connect(ctx, "test", map[string]string{"synchronous_commit": "off"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	var setting string
	if err := tx.QueryRow(ctx, "SELECT current_setting('synchronous_commit')").Scan(&setting); err != nil || setting != "off" {
		t.Fatalf("synchronous_commit %q before the end, %v", setting, err)
	}
	if _, err := tx.Exec(ctx, h.endSessionSQL(), sid); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, "SELECT current_setting('synchronous_commit')").Scan(&setting); err != nil || setting != "on" {
		t.Fatalf("synchronous_commit %q in the end that handed the name on, want on (%v)", setting, err)
	}
}

// TestSchemaRevisionUpgraded: a schema whose functions are of an older
// revision (revision 1 had no revision table and no hand-off) is brought
// to this one by the first Locker that uses it, and keeps its rows.
func TestSchemaRevisionUpgraded(t *testing.T) {
	srv := sharedServer(t)
	schema := testSchema(t)
	ctx := t.Context()
	a := open(t, srv, schema, Config{})
	la, err := a.Acquire(ctx, "up", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release()
	q := pgx.Identifier{schema}.Sanitize()
	super := srv.Super(t)
	if _, err := super.Exec(ctx, "DROP TABLE "+q+".revision; DROP FUNCTION "+q+".hand(bigint, bigint)"); err != nil {
		t.Fatal(err)
	}
	b := open(t, srv, schema, Config{})
	snap, err := b.Query(ctx, "up")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Held) != 1 || snap.Held[0].Epoch != la.Epoch() {
		t.Fatalf("after the upgrade: held %+v, want epoch %d", snap.Held, la.Epoch())
	}
	var r int
	var hand bool
	if err := super.QueryRow(ctx, "SELECT (SELECT r FROM "+q+".revision), to_regprocedure($1) IS NOT NULL", q+".hand(bigint, bigint)").Scan(&r, &hand); err != nil {
		t.Fatal(err)
	}
	if r != schemaRevision || !hand {
		t.Fatalf("revision %d, hand there %v; want %d and true", r, hand, schemaRevision)
	}
	// Another version of the tables is refused, not changed.
	if _, err := super.Exec(ctx, "UPDATE "+q+".version SET v = v + 1"); err != nil {
		t.Fatal(err)
	}
	c := open(t, srv, schema, Config{})
	if _, err := c.Query(ctx, "up"); err == nil || !strings.Contains(err.Error(), "has version 2") {
		t.Fatalf("a schema of version 2: %v, want refused", err)
	}
	super.Exec(ctx, "UPDATE "+q+".version SET v = v - 1")
}
