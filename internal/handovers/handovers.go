// Package handovers is the plain leaderrun's table of the remote backends
// it hands a command line over to (cmd.Handover): leaderrun-etcd, in the
// etcd module, and leaderrun-pg, in the pg module, each a program of its
// own so that this binary never links the etcd client and gRPC, or pgx.
// main.go builds the command line with it, and the manual is generated
// from the same command line. A third backend adds its row here; cmd
// names none.
package handovers

import "github.com/leaderrun/leaderrun/cmd"

// Table lists the backends' programs, in --help's order.
var Table = []cmd.Handover{
	{
		Flag:    "etcd-endpoints",
		Usage:   "elect over the etcd cluster at `URLS` (comma-separated), across hosts: hands the whole command line to leaderrun-etcd (next to leaderrun, else on PATH), which adds --etcd-prefix, --ttl, --host and etcdctl's TLS flags",
		Program: "leaderrun-etcd",
		Install: "cd etcd && go install ./cmd/leaderrun-etcd",
		Env:     []cmd.EnvRow{{Name: "LEADERRUN_ETCD_ENDPOINTS", Meaning: "Read by leaderrun-etcd only, as its --etcd-endpoints (also LEADERRUN_ETCD_PREFIX, LEADERRUN_ETCD_TTL, LEADERRUN_HOST, LEADERRUN_ETCD_USER and LEADERRUN_ETCD_PASSWORD). leaderrun hands over to leaderrun-etcd on the flag --etcd-endpoints, never on the variable alone: two environments that differ (a cron job, a login shell) would elect over two backends and both lead."}},
	},
	{
		Flag:    "pg-url",
		Usage:   "elect over the PostgreSQL server at `URL` (a libpq connection string; \"\" for the PG* variables alone), across hosts: hands the whole command line to leaderrun-pg (next to leaderrun, else on PATH), which adds --pg-schema, --ttl and --host",
		Program: "leaderrun-pg",
		Install: "cd pg && go install ./cmd/leaderrun-pg",
	},
}

// Options builds the plain leaderrun: cmd.Main(handovers.Options()...).
func Options() []cmd.Option { return []cmd.Option{cmd.WithHandovers(Table...)} }
