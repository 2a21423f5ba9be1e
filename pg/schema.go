package pg

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// schemaVersion is written to the version table: the tables' layout; a
// schema of another version is refused rather than changed.
// schemaRevision is written to the revision table: the functions', which
// a Locker replaces when they are older (ensureSchema). Revision 2: a
// hand-off grants the successor in the transaction that lets go.
const (
	schemaVersion  = 1
	schemaRevision = 2
)

// The schema, in a PostgreSQL schema of its own (Config.Schema; @S below),
// created on first use:
//
//   - sessions: one row per Locker session, its lease. expires_at is set
//     by the server's clock at each renewal (clock_timestamp() + ttl). The
//     session's connection holds the session-level advisory lock
//     (hashtext(schema), id): others learn that the connection is gone
//     when they can take it in shared mode.
//   - requests: one row per request; the ticket (a bigserial) orders the
//     queue; epoch and granted are set by the grant. Rows go with their
//     session (ON DELETE CASCADE).
//   - epochs: one row per name, the last epoch granted. Its row lock
//     serializes every grant and removal of the name: each function below
//     that changes a name's requests locks it first.
//
// Every function is one statement for the client: one round trip per
// grant, release or renewal.
const schemaSQL = `
CREATE SCHEMA IF NOT EXISTS @S;
CREATE TABLE IF NOT EXISTS @S.version (v int NOT NULL);
CREATE TABLE IF NOT EXISTS @S.sessions (
	id bigserial PRIMARY KEY,
	expires_at timestamptz NOT NULL,
	ttl interval NOT NULL,
	host text NOT NULL,
	pid int NOT NULL,
	backend_pid int NOT NULL,
	created timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS @S.epochs (
	name text PRIMARY KEY,
	epoch bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS @S.requests (
	ticket bigserial PRIMARY KEY,
	name text NOT NULL,
	session_id bigint NOT NULL REFERENCES @S.sessions ON DELETE CASCADE,
	exclusive boolean NOT NULL,
	steal boolean NOT NULL,
	chan text NOT NULL,
	key text NOT NULL,
	pid int NOT NULL,
	host text NOT NULL,
	uid int NOT NULL,
	command text[] NOT NULL,
	labels text[] NOT NULL,
	since timestamptz NOT NULL,
	epoch bigint,
	granted timestamptz
);
CREATE INDEX IF NOT EXISTS requests_name ON @S.requests (name, steal, ticket);
CREATE INDEX IF NOT EXISTS requests_session ON @S.requests (session_id);
CREATE TABLE IF NOT EXISTS @S.revision (r int NOT NULL);
-- Replaced in revision 2 (a hand-off grants the successor):
DROP FUNCTION IF EXISTS @S.wake_after(text, bigint, boolean, boolean);
DROP FUNCTION IF EXISTS @S.drop_request(@S.requests, boolean);

-- lock_name takes the row lock of name that serializes its grants.
CREATE OR REPLACE FUNCTION @S.lock_name(p_name text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE e bigint;
BEGIN
	SELECT epoch INTO e FROM @S.epochs WHERE name = p_name FOR UPDATE;
	IF NOT FOUND THEN
		INSERT INTO @S.epochs (name, epoch) VALUES (p_name, 0) ON CONFLICT (name) DO NOTHING;
		SELECT epoch INTO e FROM @S.epochs WHERE name = p_name FOR UPDATE;
	END IF;
	RETURN e;
END $$;

-- conn_gone reports whether session sid's connection has ended: its
-- advisory lock can be had. Never asked of the caller's own session.
CREATE OR REPLACE FUNCTION @S.conn_gone(sid bigint) RETURNS boolean LANGUAGE sql AS $$
	SELECT pg_try_advisory_xact_lock_shared(hashtext('@N'), (sid % 2147483647)::int)
$$;

-- own_backend raises unless session p_sid was opened on this very
-- backend: only the session's connection, which holds its advisory lock,
-- may act for it. A transaction-mode pooler, which runs each transaction
-- on whichever server connection is free, is refused here.
CREATE OR REPLACE FUNCTION @S.own_backend(p_sid bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF EXISTS (SELECT 1 FROM @S.sessions WHERE id = p_sid AND backend_pid <> pg_backend_pid()) THEN
		RAISE EXCEPTION 'leaderrun: session % was opened on backend %, not this one (%): a transaction-mode pooler is in front',
			p_sid, (SELECT backend_pid FROM @S.sessions WHERE id = p_sid), pg_backend_pid() USING ERRCODE = 'LR001';
	END IF;
END $$;

-- watch_chan is the channel that every change of name p_name is told on
-- (Locker.Watch): one notification per transaction at most, whoever
-- listens.
CREATE OR REPLACE FUNCTION @S.watch_chan(p_name text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
	SELECT 'lrw_' || md5('@N/' || p_name)
$$;

-- open_session makes a session with a lease of p_ttl and takes its
-- advisory lock for the life of this connection. Sessions whose lease
-- has expired are removed: nothing of theirs can be granted or hold.
CREATE OR REPLACE FUNCTION @S.open_session(p_ttl interval, p_host text, p_pid int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE sid bigint;
BEGIN
	DELETE FROM @S.sessions WHERE expires_at < clock_timestamp() - p_ttl;
	INSERT INTO @S.sessions (expires_at, ttl, host, pid, backend_pid)
		VALUES (clock_timestamp() + p_ttl, p_ttl, p_host, p_pid, pg_backend_pid()) RETURNING id INTO sid;
	IF NOT pg_try_advisory_lock(hashtext('@N'), (sid % 2147483647)::int) THEN
		RAISE EXCEPTION 'leaderrun: the advisory lock of session % is taken by another application', sid;
	END IF;
	RETURN sid;
END $$;

-- renew extends the lease of a live session by its ttl from now, by the
-- server's clock; NULL when the lease has expired or the session is gone.
CREATE OR REPLACE FUNCTION @S.renew(p_sid bigint) RETURNS float8 LANGUAGE sql AS $$
	UPDATE @S.sessions SET expires_at = clock_timestamp() + ttl
	WHERE id = p_sid AND expires_at > clock_timestamp() AND backend_pid = pg_backend_pid()
	RETURNING extract(epoch FROM ttl)::float8
$$;

-- blocker is the nearest request that request me of a locked name waits
-- for: in the steal lane, the steal ahead of it or else the first holder;
-- in the queue, the nearest conflicting request ahead of it or else the
-- last steal. NULLs when there is none: me can be granted.
CREATE OR REPLACE FUNCTION @S.blocker(me @S.requests,
	OUT ticket bigint, OUT session_id bigint, OUT epoch bigint, OUT expires timestamptz)
LANGUAGE plpgsql STABLE AS $$
BEGIN
	IF me.steal THEN
		SELECT r.ticket, r.session_id, r.epoch, s.expires_at INTO ticket, session_id, epoch, expires
			FROM @S.requests r JOIN @S.sessions s ON s.id = r.session_id
			WHERE r.name = me.name AND r.steal AND r.ticket < me.ticket ORDER BY r.ticket DESC LIMIT 1;
		IF FOUND THEN RETURN; END IF;
		SELECT r.ticket, r.session_id, r.epoch, s.expires_at INTO ticket, session_id, epoch, expires
			FROM @S.requests r JOIN @S.sessions s ON s.id = r.session_id
			WHERE r.name = me.name AND r.epoch IS NOT NULL ORDER BY r.ticket LIMIT 1;
		RETURN;
	END IF;
	SELECT r.ticket, r.session_id, r.epoch, s.expires_at INTO ticket, session_id, epoch, expires
		FROM @S.requests r JOIN @S.sessions s ON s.id = r.session_id
		WHERE r.name = me.name AND NOT r.steal AND r.ticket < me.ticket AND (me.exclusive OR r.exclusive)
		ORDER BY r.ticket DESC LIMIT 1;
	IF FOUND THEN RETURN; END IF;
	SELECT r.ticket, r.session_id, r.epoch, s.expires_at INTO ticket, session_id, epoch, expires
		FROM @S.requests r JOIN @S.sessions s ON s.id = r.session_id
		WHERE r.name = me.name AND r.steal ORDER BY r.ticket DESC LIMIT 1;
END $$;

-- grant grants request me of a locked name, which nothing blocks: the
-- epoch is max(last+1, the server's clock in µs), drawn in this
-- transaction.
CREATE OR REPLACE FUNCTION @S.grant_request(me @S.requests, OUT epoch bigint, OUT granted timestamptz) LANGUAGE plpgsql AS $$
BEGIN
	UPDATE @S.epochs e SET epoch = greatest(e.epoch + 1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)
		WHERE e.name = me.name RETURNING e.epoch INTO grant_request.epoch;
	granted := clock_timestamp();
	UPDATE @S.requests r SET epoch = grant_request.epoch, granted = grant_request.granted WHERE r.ticket = me.ticket;
	PERFORM pg_notify(@S.watch_chan(me.name), '');
END $$;

-- hand moves waiting request p_ticket of a locked name on, now that a
-- request ahead of it is gone. When nothing blocks it any more, its
-- lease lives and its session's connection lives (p_me is the caller's
-- own session, whose connection is this one; 0 for none), it is granted
-- here, in the transaction that let go, and told so with its grant
-- (' granted EPOCH MICROSECONDS'): its owner holds without another round
-- trip. Else it is told ' wake', and evaluates, which removes what can
-- never be granted and names what it waits for. A waiting request whose
-- connection is gone is never granted, here or anywhere.
CREATE OR REPLACE FUNCTION @S.hand(p_ticket bigint, p_me bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE me @S.requests; g record;
BEGIN
	SELECT * INTO me FROM @S.requests WHERE ticket = p_ticket;
	IF NOT FOUND OR me.epoch IS NOT NULL THEN RETURN; END IF;
	IF (SELECT b.ticket FROM @S.blocker(me) b) IS NULL
		AND EXISTS (SELECT 1 FROM @S.sessions WHERE id = me.session_id AND expires_at > clock_timestamp())
		AND (me.session_id = p_me OR NOT @S.conn_gone(me.session_id)) THEN
		SELECT * INTO g FROM @S.grant_request(me);
		-- A grant acknowledged must survive a crash of the server (see
		-- the session's connection), whichever connection let go.
		PERFORM set_config('synchronous_commit', 'on', true);
		PERFORM pg_notify(me.chan, me.key || ' granted ' || g.epoch || ' ' || (extract(epoch FROM g.granted) * 1000000)::bigint);
	ELSE
		PERFORM pg_notify(me.chan, me.key || ' wake');
	END IF;
END $$;

-- wake_after moves on (hand) the waiters that may move now that the
-- request p_ticket (in the steal lane or not, held or not) of p_name is
-- gone: the waiting requests after it in its lane up to and including the
-- first exclusive one; with a holder gone, the first waiting steal; with
-- the steal lane empty, the head of the queue. A bounded number of
-- notifications, whatever the length of the queue.
CREATE OR REPLACE FUNCTION @S.wake_after(p_name text, p_ticket bigint, p_steal boolean, p_held boolean, p_me bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
	FOR r IN SELECT ticket, exclusive FROM @S.requests
		WHERE name = p_name AND steal = p_steal AND ticket > p_ticket AND epoch IS NULL ORDER BY ticket LOOP
		PERFORM @S.hand(r.ticket, p_me);
		EXIT WHEN r.exclusive;
	END LOOP;
	IF p_held THEN
		FOR r IN SELECT ticket FROM @S.requests WHERE name = p_name AND steal AND epoch IS NULL ORDER BY ticket LIMIT 1 LOOP
			PERFORM @S.hand(r.ticket, p_me);
		END LOOP;
	END IF;
	IF p_steal AND NOT EXISTS (SELECT 1 FROM @S.requests WHERE name = p_name AND steal) THEN
		FOR r IN SELECT ticket, exclusive FROM @S.requests
			WHERE name = p_name AND NOT steal AND epoch IS NULL ORDER BY ticket LOOP
			PERFORM @S.hand(r.ticket, p_me);
			EXIT WHEN r.exclusive;
		END LOOP;
	END IF;
END $$;

-- dropped tells of request r of a locked name, just removed: its owner
-- (' gone', unless p_own), the name's watchers, and moves on who may move
-- (p_me: wake_after).
CREATE OR REPLACE FUNCTION @S.dropped(r @S.requests, p_own boolean, p_me bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify(@S.watch_chan(r.name), '');
	IF NOT p_own THEN
		PERFORM pg_notify(r.chan, r.key || ' gone');
	END IF;
	PERFORM @S.wake_after(r.name, r.ticket, r.steal, r.epoch IS NOT NULL, p_me);
END $$;

-- drop_request removes one request of a locked name (dropped).
CREATE OR REPLACE FUNCTION @S.drop_request(r @S.requests, p_own boolean, p_me bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM @S.requests WHERE ticket = r.ticket;
	PERFORM @S.dropped(r, p_own, p_me);
END $$;

-- evaluate grants request p_ticket of session p_sid if nothing conflicting
-- is held or ahead of it, else names what it waits for: its blocker's
-- session, whether that session's connection lives, and how long its
-- lease has left by the server's clock. On the way it removes blockers
-- that can never be granted or hold again: requests whose lease expired
-- by the server's clock, and waiting requests whose connection is gone
-- (their session can make no grant any more). A granted request whose
-- connection is gone but whose lease has not expired still blocks: its
-- holder may not know yet, and ends its term by its own clock before the
-- lease can expire. Removing a blocker may grant the request itself
-- (hand), which then reads as granted.
CREATE OR REPLACE FUNCTION @S.evaluate(p_ticket bigint, p_sid bigint,
	OUT state text, OUT epoch bigint, OUT granted timestamptz, OUT blocker bigint, OUT blocker_live boolean, OUT wait_s float8)
LANGUAGE plpgsql AS $$
DECLARE
	me @S.requests;
	dead @S.requests;
	b record;
	nm text;
BEGIN
	PERFORM @S.own_backend(p_sid);
	SELECT name INTO nm FROM @S.requests WHERE ticket = p_ticket AND session_id = p_sid;
	IF NOT FOUND THEN state := 'lost'; RETURN; END IF;
	PERFORM @S.lock_name(nm);
	IF NOT EXISTS (SELECT 1 FROM @S.sessions WHERE id = p_sid AND expires_at > clock_timestamp()) THEN
		state := 'lost'; RETURN;
	END IF;
	LOOP
		SELECT * INTO me FROM @S.requests WHERE ticket = p_ticket AND session_id = p_sid;
		IF NOT FOUND THEN state := 'lost'; RETURN; END IF;
		IF me.epoch IS NOT NULL THEN
			state := 'granted'; epoch := me.epoch; granted := me.granted; RETURN;
		END IF;
		SELECT * INTO b FROM @S.blocker(me);
		EXIT WHEN b.ticket IS NULL;
		IF b.session_id = p_sid THEN
			state := 'wait'; blocker := p_sid; blocker_live := true; RETURN;
		END IF;
		IF b.expires <= clock_timestamp() THEN
			SELECT * INTO dead FROM @S.requests WHERE ticket = b.ticket;
			PERFORM @S.drop_request(dead, false, p_sid);
			CONTINUE;
		END IF;
		blocker_live := NOT @S.conn_gone(b.session_id);
		IF NOT blocker_live AND b.epoch IS NULL THEN
			SELECT * INTO dead FROM @S.requests WHERE ticket = b.ticket;
			PERFORM @S.drop_request(dead, false, p_sid);
			CONTINUE;
		END IF;
		state := 'wait'; blocker := b.session_id;
		wait_s := extract(epoch FROM b.expires - clock_timestamp())::float8;
		RETURN;
	END LOOP;
	SELECT g.epoch, g.granted INTO epoch, granted FROM @S.grant_request(me) g;
	state := 'granted';
END $$;

-- enqueue makes a request and evaluates it at once. With p_try, a request
-- that would wait is removed again and the state is 'busy'. A steal that
-- heads the steal lane tells every holder that is not a steal (' stolen')
-- and reports deposed when there were any.
CREATE OR REPLACE FUNCTION @S.enqueue(p_sid bigint, p_name text, p_exclusive boolean, p_steal boolean, p_try boolean,
	p_chan text, p_key text, p_pid int, p_host text, p_uid int, p_command text[], p_labels text[],
	OUT ticket bigint, OUT state text, OUT epoch bigint, OUT granted timestamptz, OUT blocker bigint, OUT blocker_live boolean,
	OUT wait_s float8, OUT deposed boolean, OUT since timestamptz)
LANGUAGE plpgsql AS $$
DECLARE r record; ev record;
BEGIN
	PERFORM @S.own_backend(p_sid);
	PERFORM @S.lock_name(p_name);
	since := clock_timestamp();
	deposed := false;
	IF NOT EXISTS (SELECT 1 FROM @S.sessions WHERE id = p_sid AND expires_at > clock_timestamp()) THEN
		ticket := 0; state := 'nosession'; RETURN; -- ended by someone else, or expired
	END IF;
	INSERT INTO @S.requests (name, session_id, exclusive, steal, chan, key, pid, host, uid, command, labels, since)
		VALUES (p_name, p_sid, p_exclusive, p_steal, p_chan, p_key, p_pid, p_host, p_uid, p_command, p_labels, since)
		RETURNING requests.ticket INTO ticket;
	PERFORM pg_notify(@S.watch_chan(p_name), '');
	IF p_steal AND NOT EXISTS (SELECT 1 FROM @S.requests q WHERE q.name = p_name AND q.steal AND q.ticket < enqueue.ticket) THEN
		FOR r IN SELECT chan, key FROM @S.requests q WHERE q.name = p_name AND q.epoch IS NOT NULL AND NOT q.steal LOOP
			PERFORM pg_notify(r.chan, r.key || ' stolen');
			deposed := true;
		END LOOP;
	END IF;
	SELECT * INTO ev FROM @S.evaluate(ticket, p_sid);
	state := ev.state; epoch := ev.epoch; granted := ev.granted; blocker := ev.blocker; blocker_live := ev.blocker_live; wait_s := ev.wait_s;
	IF p_try AND state = 'wait' THEN
		DELETE FROM @S.requests q WHERE q.ticket = enqueue.ticket;
		state := 'busy';
	END IF;
END $$;

-- leave removes request p_ticket of session p_sid, held or waiting: a
-- release or a cancel. It removes nothing of another session, and
-- nothing at all for a ticket that is gone.
CREATE OR REPLACE FUNCTION @S.leave(p_ticket bigint, p_sid bigint) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE me @S.requests; nm text;
BEGIN
	PERFORM @S.own_backend(p_sid);
	SELECT name INTO nm FROM @S.requests WHERE ticket = p_ticket AND session_id = p_sid;
	IF NOT FOUND THEN RETURN false; END IF;
	PERFORM @S.lock_name(nm);
	SELECT * INTO me FROM @S.requests WHERE ticket = p_ticket AND session_id = p_sid;
	IF NOT FOUND THEN RETURN false; END IF;
	PERFORM @S.drop_request(me, true, p_sid);
	RETURN true;
END $$;

-- end_session removes session p_sid and every request of it, telling
-- their owners (' gone') and moving on who may move: a revoke, for a
-- watchdog whose leaderrun died, a steal's KillAfter, or an ended session
-- whose last term was released. Every request goes before anyone is
-- moved on, so that no one is handed to a request of the session or told
-- to wait for one. Names are locked in order, so two of these never
-- deadlock.
CREATE OR REPLACE FUNCTION @S.end_session(p_sid bigint) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE r @S.requests; rs @S.requests[]; nm text; ended boolean;
BEGIN
	FOR nm IN SELECT DISTINCT name FROM @S.requests WHERE session_id = p_sid ORDER BY name LOOP
		PERFORM @S.lock_name(nm);
	END LOOP;
	SELECT coalesce(array_agg(q ORDER BY q.ticket), '{}') INTO rs FROM @S.requests q WHERE q.session_id = p_sid;
	DELETE FROM @S.sessions WHERE id = p_sid; -- and, by cascade, its requests
	ended := FOUND;
	FOREACH r IN ARRAY rs LOOP
		PERFORM @S.dropped(r, false, 0);
	END LOOP;
	RETURN ended;
END $$;

-- check tells a holder whether its term still stands: 'held', 'stolen'
-- (a steal is queued and the holder is none) or 'lost'.
CREATE OR REPLACE FUNCTION @S.check(p_ticket bigint, p_sid bigint) RETURNS text LANGUAGE sql AS $$
	SELECT CASE
		WHEN NOT EXISTS (SELECT 1 FROM @S.requests r JOIN @S.sessions s ON s.id = r.session_id
			WHERE r.ticket = p_ticket AND r.session_id = p_sid AND r.epoch IS NOT NULL AND s.expires_at > clock_timestamp()) THEN 'lost'
		WHEN EXISTS (SELECT 1 FROM @S.requests me, @S.requests st WHERE me.ticket = p_ticket AND NOT me.steal
			AND st.name = me.name AND st.steal) THEN 'stolen'
		ELSE 'held' END
$$;

INSERT INTO @S.version (v) SELECT @V WHERE NOT EXISTS (SELECT 1 FROM @S.version);
DELETE FROM @S.revision;
INSERT INTO @S.revision (r) VALUES (@R);
`

// schemaText is schemaSQL for schema name n.
func schemaText(n string) string {
	q := pgx.Identifier{n}.Sanitize()
	s := strings.ReplaceAll(schemaSQL, "@N", strings.ReplaceAll(n, "'", "''"))
	s = strings.ReplaceAll(s, "@V", strconv.Itoa(schemaVersion))
	s = strings.ReplaceAll(s, "@R", strconv.Itoa(schemaRevision))
	return strings.ReplaceAll(s, "@S", q)
}

// ensureSchema creates the schema when it is missing, and brings its
// functions to schemaRevision when they are older, under an advisory lock
// so that two first users do not race in the catalogs; it refuses a
// schema of another version. The functions of every revision keep the
// tables and the notifications' words of version 1, so hosts of older
// and newer revisions can share a schema while they are upgraded one by
// one: an older one takes a grant told with the notification as a wake,
// and reads it with its next evaluate.
func (l *Locker) ensureSchema(ctx context.Context, c *pgx.Conn) error {
	if done, err := l.schemaCurrent(ctx, c); done || err != nil {
		return err
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		return l.pgErr("creating the schema", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('leaderrun schema'), hashtext($1))", l.schema); err != nil {
		return l.pgErr("creating the schema", err)
	}
	// Again under the lock: another may have done it meanwhile.
	if done, err := l.schemaCurrent(ctx, tx); done || err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, schemaText(l.schema)); err != nil {
		return l.pgErr("creating the schema "+l.schema, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return l.pgErr("creating the schema "+l.schema, err)
	}
	return nil
}

// rowQuerier is a connection or a transaction.
type rowQuerier interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}

// schemaCurrent reports whether the schema is there with this version and
// a revision at least this one (done), or fails for another version.
func (l *Locker) schemaCurrent(ctx context.Context, q rowQuerier) (done bool, err error) {
	v, r, err := l.readVersion(ctx, q)
	switch {
	case err != nil:
		return false, err
	case v != 0 && v != schemaVersion:
		return false, l.otherVersion(v)
	}
	return v == schemaVersion && r >= schemaRevision, nil
}

// readVersion reads the schema's version and its functions' revision: 0
// for what is missing (no schema, or a revision-1 schema, which had no
// revision table).
func (l *Locker) readVersion(ctx context.Context, q rowQuerier) (v, r int, err error) {
	var hasV, hasR bool
	err = q.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL", l.q+".version", l.q+".revision").Scan(&hasV, &hasR)
	if err != nil {
		return 0, 0, l.pgErr("reading the schema version", err)
	}
	if !hasV {
		return 0, 0, nil
	}
	sql := "SELECT coalesce((SELECT max(v) FROM " + l.q + ".version), 0), 1"
	if hasR {
		sql = "SELECT coalesce((SELECT max(v) FROM " + l.q + ".version), 0), coalesce((SELECT max(r) FROM " + l.q + ".revision), 1)"
	}
	if err := q.QueryRow(ctx, sql).Scan(&v, &r); err != nil {
		return 0, 0, l.pgErr("reading the schema version", err)
	}
	return v, r, nil
}

func (l *Locker) otherVersion(v int) error {
	return fmt.Errorf("pg: schema %s has version %d; this leaderrun knows version %d: use another Config.Schema (--pg-schema) or upgrade every host", l.schema, v, schemaVersion)
}
