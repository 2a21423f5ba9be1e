// Package pgcmd is the leaderrun command line over PostgreSQL:
// leaderrun-pg's flags, and the glue that gives package cmd a pg Locker as
// its Backend, with the capabilities Remote, BusBackend, TermEnder,
// HolderEnder and GraceFitter (see cmd.Backend). Everything else (flags,
// subcommands, exit codes, output, the term fence and the watchdog) is
// package cmd's, unchanged.
//
// The connection is libpq's: --pg-url (or LEADERRUN_PG_URL) takes a URL
// (postgres://USER:PASSWORD@HOST:PORT/DB?sslmode=verify-full) or key=value
// pairs, and what it leaves out comes from the PG* environment variables
// (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGPASSFILE, PGDATABASE,
// PGSSLMODE, PGSSLROOTCERT, PGSSLCERT, PGSSLKEY, PGSERVICE, ...) and
// ~/.pgpass, as libpq reads them. TLS is libpq's sslmode and its files.
//
// # Guarantees
//
//   - COMMAND runs only while its term's lease can still be alive: the
//     term ends --grace and a second (the margin) before the lease can
//     expire by the server's clock, and COMMAND is stopped (SIGTERM, then
//     SIGKILL after --grace) by then, by leaderrun or, when leaderrun is
//     stopped or starved, by the term's watchdog (package cmd, Linux).
//   - When leaderrun dies (SIGKILL, the OOM killer) on a live host, its
//     watchdog stops COMMAND and then ends the term's session, so the
//     next holder on any host is granted at once instead of after the TTL.
//   - Term markers, cgroups and the watchdog live in the local lock
//     directory (--dir, LEADERRUN_DIR, or the per-user default), which
//     also tells hosts apart on one machine (tests).
package pgcmd

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/remote"
	"github.com/leaderrun/leaderrun/pg"
)

// DefaultTTL is leaderrun-pg's lease TTL: room for the default --grace
// (5s) and a second within half of it.
const DefaultTTL = 15 * time.Second

// Flags are leaderrun-pg's own flags, added to every command.
var Flags = []cmd.BackendFlag{
	{Name: "pg-url", EnvVar: "LEADERRUN_PG_URL", Usage: "PostgreSQL connection `STRING`, a URL (postgres://USER@HOST:5432/DB?sslmode=verify-full) or libpq key=value pairs; what it leaves out comes from PGHOST, PGUSER, PGPASSWORD, PGSSLMODE and the other PG* variables"},
	{Name: "pg-schema", EnvVar: "LEADERRUN_PG_SCHEMA", Value: pg.DefaultSchema, Usage: "PostgreSQL `SCHEMA` of leaderrun's tables, created on first use; all hosts of a name must use the same"},
	{Name: "ttl", EnvVar: "LEADERRUN_PG_TTL", Value: DefaultTTL.String(), Usage: "lease `DURATION`: a dead or cut-off host's term passes after it; must hold twice --grace plus 2s"},
	{Name: "host", EnvVar: "LEADERRUN_HOST", Usage: "the `NAME` this host goes by in status and who (default: its hostname)"},
	{Name: "connect-timeout", Value: "5s", Usage: "give up reaching PostgreSQL after `DURATION` (unless the connection string sets connect_timeout)"},
}

// Options builds leaderrun-pg: cmd.Main(pgcmd.Options()...).
func Options() []cmd.Option {
	return []cmd.Option{
		cmd.WithBackend(Open, Flags...),
		cmd.WithTermEnder(EndTerm),
		cmd.WithTermEndPreparer(preparer{}),
		cmd.WithUsage("run a command on only one instance at a time, across hosts, elected over PostgreSQL"),
	}
}

// settings are the parsed flags: what a watchdog needs to reach the server
// again, too (the TermToken).
type settings struct {
	URL     string            `json:"url"`
	Env     map[string]string `json:"env,omitempty"` // the PG* variables, as the command saw them
	Schema  string            `json:"schema"`
	Timeout time.Duration     `json:"timeout"`
	Session int64             `json:"session,omitempty"`
	lease   remote.Lease      // the margin, and a --grace fitted to --ttl (FitGrace)
}

var usage = remote.Usage

// parse reads the flags.
func parse(v cmd.FlagValue) (settings, pg.Config, error) {
	s := settings{URL: v("pg-url"), Schema: v("pg-schema"), Env: pgEnv()}
	var cfg pg.Config
	ttl, err := time.ParseDuration(v("ttl"))
	if err != nil || ttl < pg.MinTTL {
		return s, cfg, usage("--ttl %q is not a duration of at least %v; give one such as --ttl 15s", v("ttl"), pg.MinTTL)
	}
	if s.Timeout, err = time.ParseDuration(v("connect-timeout")); err != nil || s.Timeout <= 0 {
		return s, cfg, usage("--connect-timeout %q is not a positive duration; give one such as --connect-timeout 5s", v("connect-timeout"))
	}
	// --grace is "" for a command that runs no COMMAND (status, who).
	if s.lease, err = remote.LeaseFor(ttl, v("grace")); err != nil {
		return s, cfg, err
	}
	if s.Schema == "" || len(s.Schema) > 63 || strings.ContainsAny(s.Schema, "\x00") {
		return s, cfg, usage("--pg-schema %q is not a PostgreSQL name (1 to 63 bytes)", s.Schema)
	}
	cc, err := s.connConfig()
	if err != nil {
		return s, cfg, err
	}
	cfg = pg.Config{ConnConfig: cc, Schema: s.Schema, TTL: ttl, Margin: s.lease.Margin, Host: v("host")}
	return s, cfg, nil
}

// pgEnv is the PG* environment, for a watchdog that may not inherit it.
func pgEnv() map[string]string {
	m := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "PG") {
			m[k] = v
		}
	}
	return m
}

// connConfig parses the connection string as libpq would.
func (s settings) connConfig() (*pgx.ConnConfig, error) {
	for k, v := range s.Env {
		if _, ok := os.LookupEnv(k); !ok {
			os.Setenv(k, v) // a watchdog's: pgx reads PG* from the environment
		}
	}
	cc, err := pgx.ParseConfig(s.URL)
	if err != nil {
		return nil, usage("the PostgreSQL connection string does not parse: %v; give --pg-url postgres://USER@HOST:5432/DB or key=value pairs as libpq takes them", oneLine(err))
	}
	if !strings.Contains(s.URL, "connect_timeout") && os.Getenv("PGCONNECT_TIMEOUT") == "" {
		cc.ConnectTimeout = s.Timeout
	}
	return cc, nil
}

// connMsg is a connection error in one line: pgx reports each address
// and TLS attempt on a line of its own after a common prefix; repeated
// ones are said once.
func connMsg(err error) string {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return oneLine(err)
	}
	var parts []string
	for _, ln := range strings.Split(ce.Unwrap().Error(), "\n") {
		if ln = strings.Join(strings.Fields(ln), " "); ln != "" && !slices.Contains(parts, ln) {
			parts = append(parts, ln)
		}
	}
	return strings.Join(parts, "; ")
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// server names the server for messages: user@host:port/db.
func server(cc *pgx.ConnConfig) string {
	host := cc.Host
	if strings.HasPrefix(host, "/") {
		host = "socket " + host
	}
	return fmt.Sprintf("%s@%s/%s", cc.User, net.JoinHostPort(host, fmt.Sprint(cc.Port)), cc.Database)
}

// refused is the exit for a first round trip that failed: 77 when the
// server refused us (authentication, privileges), 69 when it could not be
// reached or spoke no TLS that we trust.
func refused(cc *pgx.ConnConfig, schema string, err error) error {
	srv := server(cc)
	if errors.Is(err, pg.ErrPooler) {
		return cmd.Exitf(cmd.ExitUnavailable, "leaderrun: PostgreSQL at %s: %v", srv, oneLine(err))
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "28P01" || pe.Code == "28000":
			return cmd.Exitf(cmd.ExitNoPerm, "leaderrun: PostgreSQL at %s refused leaderrun: %s; check the user and password (--pg-url, PGUSER, PGPASSWORD or ~/.pgpass) and pg_hba.conf", srv, pe.Message)
		case pe.Code == "42501" && strings.Contains(pe.Message, "for database"):
			return cmd.Exitf(cmd.ExitNoPerm, "leaderrun: PostgreSQL role %s may not create schema %s: %s; have the database's owner run GRANT CREATE ON DATABASE %s TO %s once, or create the schema for it (see pg/README.md)", cc.User, schema, pe.Message, cc.Database, cc.User)
		case pe.Code == "42501":
			return cmd.Exitf(cmd.ExitNoPerm, "leaderrun: PostgreSQL role %s may not use schema %s: %s; have the schema's owner grant it the rights pg/README.md lists", cc.User, schema, pe.Message)
		case pe.Code == "3D000":
			return cmd.Exitf(cmd.ExitUnavailable, "leaderrun: PostgreSQL at %s has no such database: %s; name an existing one in --pg-url (or PGDATABASE)", srv, pe.Message)
		}
	}
	msg := connMsg(err)
	if strings.Contains(msg, "x509: ") || strings.Contains(msg, "tls: ") {
		return cmd.Exitf(cmd.ExitUnavailable, "leaderrun: PostgreSQL at %s: TLS failed: %s; check sslmode, sslrootcert (PGSSLMODE, PGSSLROOTCERT) and the server's certificate", srv, msg)
	}
	return cmd.Exitf(cmd.ExitUnavailable, "leaderrun: PostgreSQL at %s cannot be reached: %s; check --pg-url (or LEADERRUN_PG_URL and PGHOST) and that the server runs", srv, msg)
}

// Open is leaderrun-pg's cmd.Opener: a pg Locker for the election. The
// commands keep the term markers and the watchdog in the local lock
// directory, which they open themselves.
func Open(v cmd.FlagValue) (cmd.Backend, error) {
	s, cfg, err := parse(v)
	if err != nil {
		return nil, err
	}
	lk, err := pg.Open(cfg)
	if err != nil {
		return nil, usage("%v", err)
	}
	// A first round trip, bounded, so that a wrong URL, a refused login,
	// a TLS failure or missing privileges is told at once rather than by
	// a request that waits for it.
	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout+time.Second)
	err = lk.Ping(ctx)
	cancel()
	if err != nil {
		lk.Close()
		return nil, refused(cfg.ConnConfig, s.Schema, err)
	}
	return &backend{Locker: lk, s: s, cc: cfg.ConnConfig}, nil
}

// backend is a pg Locker.
type backend struct {
	*pg.Locker
	s  settings
	cc *pgx.ConnConfig
}

// FitGrace is cmd.GraceFitter (remote.Lease.FitGrace).
func (b *backend) FitGrace(grace time.Duration, given bool) (time.Duration, string, error) {
	return b.s.lease.FitGrace(grace, given)
}

// Where (cmd.Remote) is what messages name as where the locks are.
func (b *backend) Where() string {
	return "PostgreSQL " + server(b.cc) + " schema " + b.s.Schema
}

// TermToken is what the term's watchdog needs to end its session.
func (b *backend) TermToken(lead *elect.Leadership) (string, error) {
	id, err := b.Session(lead)
	if err != nil {
		return "", err
	}
	s := b.s
	s.Session = id
	j, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	return base64.RawStdEncoding.EncodeToString(j), nil
}

// EndTerm ends the session a TermToken names: the watchdog's last act,
// once COMMAND is gone.
func EndTerm(ctx context.Context, token string) error {
	lk, id, err := openToken(token)
	if err != nil {
		return err
	}
	defer lk.Close()
	return lk.EndSession(ctx, id)
}

// openToken is a Locker for the server and schema a TermToken names, and
// the session to end.
func openToken(token string) (*pg.Locker, int64, error) {
	j, err := base64.RawStdEncoding.DecodeString(token)
	if err != nil {
		return nil, 0, fmt.Errorf("pgcmd: bad term token: %w", err)
	}
	var s settings
	if err := json.Unmarshal(j, &s); err != nil || s.Session == 0 {
		return nil, 0, fmt.Errorf("pgcmd: bad term token: %v", err)
	}
	cc, err := s.connConfig()
	if err != nil {
		return nil, 0, err
	}
	lk, err := pg.Open(pg.Config{ConnConfig: cc, Schema: s.Schema})
	if err != nil {
		return nil, 0, err
	}
	return lk, s.Session, nil
}

// preparer is the watchdog's cmd.TermEndPreparer: as the term begins it
// opens the connection that will end the term's session should
// leaderrun die (pg.Locker.PrepareEndSession), so that the end, once
// COMMAND is gone, is one round trip instead of a connection, an
// authentication and a cold backend's first call. A connection the
// server ended meanwhile is replaced by a fresh one at the end.
type preparer struct{}

func (preparer) PrepareTermEnd(token string) (func(context.Context) error, func()) {
	lk, id, err := openToken(token)
	if err != nil {
		return func(ctx context.Context) error { return EndTerm(ctx, token) }, func() {}
	}
	e := lk.PrepareEndSession(id)
	return e.End, func() {
		e.Close()
		lk.Close()
	}
}

var (
	_ cmd.Remote      = (*backend)(nil)
	_ cmd.TermEnder   = (*backend)(nil)
	_ cmd.HolderEnder = (*backend)(nil)
	_ cmd.GraceFitter = (*backend)(nil)
)

// ListenBus serves NAME's bus over PostgreSQL (pg.Locker.ListenBus), so
// that members on every host hear the leader.
func (b *backend) ListenBus(lead *elect.Leadership) (cmd.BusServer, error) {
	s, err := b.Locker.ListenBus(lead)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// DialBus makes a member of NAME's bus over PostgreSQL
// (pg.Locker.DialBus).
func (b *backend) DialBus(ctx context.Context, name string, o cmd.BusOptions) (cmd.BusClient, error) {
	c, err := b.Locker.DialBus(ctx, name, pg.BusDial{WaitForLeader: o.WaitForLeader, PublishOnly: o.PublishOnly})
	if err != nil {
		return nil, err
	}
	return c, nil
}

var _ cmd.BusBackend = (*backend)(nil)
