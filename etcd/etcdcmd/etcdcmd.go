// Package etcdcmd is the leaderrun command line over etcd: leaderrun-etcd's
// flags, and the glue that gives package cmd an etcd Locker as its
// Backend, with the capabilities Remote, BusBackend, TermEnder,
// HolderEnder and GraceFitter (see cmd.Backend). Everything else (flags,
// subcommands, exit codes, output, the term fence and the watchdog) is
// package cmd's, unchanged.
//
// # Guarantees
//
//   - COMMAND runs only while its term's lease can still be alive: the
//     term ends --grace and a second (Margin) before the lease can expire
//     on the server, and COMMAND is stopped (SIGTERM, then SIGKILL after
//     --grace) by then, by leaderrun or, when leaderrun is stopped or
//     starved, by the term's watchdog (package cmd, Linux).
//   - When leaderrun dies (SIGKILL, the OOM killer) on a live host, its
//     watchdog stops COMMAND and then revokes the term's lease, so the next
//     holder on any host is granted at once instead of after the TTL.
//   - Term markers, cgroups and the watchdog live in the local lock
//     directory (--dir, LEADERRUN_DIR, or the per-user default), which
//     also tells hosts apart on one machine (tests).
package etcdcmd

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/etcd"
	etcdbus "github.com/leaderrun/leaderrun/etcd/bus"
	"github.com/leaderrun/leaderrun/internal/remote"
)

// DefaultTTL is leaderrun-etcd's lease TTL: room for the default --grace
// (5s) and a second within half of it.
const DefaultTTL = 15 * time.Second

// Flags are leaderrun-etcd's own flags, added to every command. The TLS and
// auth flags are named as etcdctl names them.
var Flags = []cmd.BackendFlag{
	{Name: "etcd-endpoints", EnvVar: "LEADERRUN_ETCD_ENDPOINTS", Usage: "etcd cluster `URLS`, comma-separated, such as http://10.0.0.1:2379,http://10.0.0.2:2379"},
	{Name: "etcd-prefix", EnvVar: "LEADERRUN_ETCD_PREFIX", Value: etcd.DefaultPrefix, Usage: "key `PREFIX` of every key leaderrun writes; all hosts of a name must use the same"},
	{Name: "ttl", EnvVar: "LEADERRUN_ETCD_TTL", Value: DefaultTTL.String(), Usage: "lease `DURATION`, whole seconds: a dead or cut-off host's term passes after it; must hold twice --grace plus 2s"},
	{Name: "host", EnvVar: "LEADERRUN_HOST", Usage: "the `NAME` this host goes by in status, who and subscribe (default: its hostname)"},
	{Name: "cacert", Usage: "verify the etcd servers with the CA bundle in `FILE`"},
	{Name: "cert", Usage: "identify to etcd with the TLS certificate in `FILE`"},
	{Name: "key", Usage: "the private key, in `FILE`, of --cert"},
	{Name: "insecure-skip-tls-verify", Bool: true, Usage: "accept any etcd server certificate (testing only)"},
	{Name: "user", EnvVar: "LEADERRUN_ETCD_USER", Usage: "etcd `USER[:PASSWORD]` (etcd auth)"},
	{Name: "password", EnvVar: "LEADERRUN_ETCD_PASSWORD", Usage: "`PASSWORD` of --user, when --user has none"},
	{Name: "dial-timeout", Value: "5s", Usage: "give up reaching etcd after `DURATION`"},
}

// Options builds leaderrun-etcd: cmd.Main(etcdcmd.Options()...).
func Options() []cmd.Option {
	return []cmd.Option{
		cmd.WithBackend(Open, Flags...),
		cmd.WithTermEnder(EndTerm),
		cmd.WithUsage("run a command on only one instance at a time, across hosts, elected over etcd"),
	}
}

// settings are the parsed flags: what a watchdog needs to reach etcd
// again, too (the TermToken).
type settings struct {
	Endpoints   []string      `json:"endpoints"`
	CACert      string        `json:"cacert,omitempty"`
	Cert        string        `json:"cert,omitempty"`
	Key         string        `json:"key,omitempty"`
	SkipVerify  bool          `json:"skip_verify,omitempty"`
	User        string        `json:"user,omitempty"`
	Password    string        `json:"password,omitempty"`
	DialTimeout time.Duration `json:"dial_timeout"`
	Lease       int64         `json:"lease,omitempty"`
	prefix      string        // for messages
	lease       remote.Lease  // the margin, and a --grace fitted to --ttl (FitGrace)
}

var usage = remote.Usage

// parse reads the flags; the TTL, margin and host go to etcd.Config.
func parse(v cmd.FlagValue) (settings, etcd.Config, error) {
	var s settings
	var cfg etcd.Config
	for _, e := range strings.Split(v("etcd-endpoints"), ",") {
		if e = strings.TrimSpace(e); e != "" {
			s.Endpoints = append(s.Endpoints, e)
		}
	}
	if len(s.Endpoints) == 0 {
		return s, cfg, usage("no etcd cluster given; name it with --etcd-endpoints http://HOST:2379[,...] or LEADERRUN_ETCD_ENDPOINTS")
	}
	ttl, err := time.ParseDuration(v("ttl"))
	if err != nil || ttl < etcd.MinTTL || ttl%time.Second != 0 {
		return s, cfg, usage("--ttl %q is not a whole number of seconds of at least %v; give one such as --ttl 15s", v("ttl"), etcd.MinTTL)
	}
	if s.DialTimeout, err = time.ParseDuration(v("dial-timeout")); err != nil || s.DialTimeout <= 0 {
		return s, cfg, usage("--dial-timeout %q is not a positive duration; give one such as --dial-timeout 5s", v("dial-timeout"))
	}
	// --grace is "" for a command that runs no COMMAND (status, who).
	if s.lease, err = remote.LeaseFor(ttl, v("grace")); err != nil {
		return s, cfg, err
	}
	s.CACert, s.Cert, s.Key, s.SkipVerify = v("cacert"), v("cert"), v("key"), v("insecure-skip-tls-verify") == "true"
	if (s.Cert == "") != (s.Key == "") {
		return s, cfg, usage("--cert and --key go together: give both, or neither")
	}
	s.User, s.Password = v("user"), v("password")
	if u, p, ok := strings.Cut(s.User, ":"); ok {
		s.User, s.Password = u, p
	}
	s.prefix = v("etcd-prefix")
	cfg = etcd.Config{Prefix: s.prefix, TTL: ttl, Margin: s.lease.Margin, Host: v("host")}
	return s, cfg, nil
}

// tls is the TLS configuration the flags ask for, nil for none.
func (s settings) tls() (*tls.Config, error) {
	if s.CACert == "" && s.Cert == "" && !s.SkipVerify {
		return nil, nil
	}
	tc, err := transport.TLSInfo{TrustedCAFile: s.CACert, CertFile: s.Cert, KeyFile: s.Key, InsecureSkipVerify: s.SkipVerify}.ClientConfig()
	if err != nil {
		return nil, usage("the TLS flags do not load: %v; check --cacert, --cert and --key", err)
	}
	return tc, nil
}

// client dials etcd as s says.
func (s settings) client() (*clientv3.Client, error) {
	cc := clientv3.Config{Endpoints: s.Endpoints, DialTimeout: s.DialTimeout, Username: s.User, Password: s.Password, Logger: zap.NewNop()}
	tc, err := s.tls()
	if err != nil {
		return nil, err
	}
	cc.TLS = tc
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, unreachable(s, err)
	}
	return cli, nil
}

// unreachable is the exit for a first round trip that failed: 77 when
// etcd refused us (auth), 69 when it could not be reached.
func unreachable(s settings, err error) error {
	eps := strings.Join(s.Endpoints, ",")
	for _, refused := range []error{rpctypes.ErrUserEmpty, rpctypes.ErrAuthFailed, rpctypes.ErrPermissionDenied, rpctypes.ErrInvalidAuthToken, rpctypes.ErrAuthNotEnabled} {
		if errors.Is(err, refused) {
			return cmd.Exitf(cmd.ExitNoPerm, "leaderrun: etcd at %s refused leaderrun: %v; give --user USER[:PASSWORD] (or LEADERRUN_ETCD_USER) of a role that may read and write %s", eps, err, s.prefix)
		}
	}
	return cmd.Exitf(cmd.ExitUnavailable, "leaderrun: etcd at %s cannot be reached: %v; check --etcd-endpoints and that the cluster has a quorum", eps, err)
}

// Open is leaderrun-etcd's cmd.Opener: an etcd Locker for the election.
// The commands keep the term markers and the watchdog in the local lock
// directory, which they open themselves.
func Open(v cmd.FlagValue) (cmd.Backend, error) {
	s, cfg, err := parse(v)
	if err != nil {
		return nil, err
	}
	cli, lk, err := connect(s, cfg)
	if err != nil {
		return nil, err
	}
	return &backend{Locker: lk, cli: cli, s: s}, nil
}

// connect dials etcd and makes the first round trip (openLocker), while
// probing the endpoints (probe.go): when every endpoint fails for certain
// (refused, a certificate problem, the wrong scheme), it says so at once
// instead of after the dial timeout.
func connect(s settings, cfg etcd.Config) (*clientv3.Client, *etcd.Locker, error) {
	tc, err := s.tls()
	if err != nil {
		return nil, nil, err
	}
	type opened struct {
		cli *clientv3.Client
		lk  *etcd.Locker
		err error
	}
	done := make(chan opened, 1)
	go func() {
		cli, err := s.client()
		if err != nil {
			done <- opened{err: err}
			return
		}
		lk, err := openLocker(cli, s, cfg)
		if err != nil {
			cli.Close()
		}
		done <- opened{cli, lk, err}
	}()
	door := make(chan error, 1)
	pctx, cancel := context.WithTimeout(context.Background(), min(probeTimeout, s.DialTimeout))
	defer cancel()
	go func() { door <- probeAll(pctx, s.Endpoints, tc) }()
	for {
		select {
		case o := <-done:
			if o.err != nil && door != nil {
				if derr := <-door; derr != nil {
					return nil, nil, doorExit(derr)
				}
			}
			return o.cli, o.lk, o.err
		case derr := <-door:
			if derr == nil {
				door = nil
				continue
			}
			go func() {
				if o := <-done; o.err == nil {
					o.lk.Close()
					o.cli.Close()
				}
			}()
			return nil, nil, doorExit(derr)
		}
	}
}

func doorExit(err error) error {
	return cmd.Exitf(cmd.ExitUnavailable, "leaderrun: etcd cannot be reached: %v; check --etcd-endpoints and the TLS flags", err)
}

// openLocker makes a first round trip, bounded, so that a wrong endpoint
// or a refused login is told at once rather than by a request that waits
// for it, then opens the Locker on cli. The read is serializable: any
// member answers it, also without a quorum, which a request then waits
// for (elect.ErrUnavailable, queued again).
func openLocker(cli *clientv3.Client, s settings, cfg etcd.Config) (*etcd.Locker, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.DialTimeout)
	_, err := cli.Get(ctx, cfg.Prefix, clientv3.WithCountOnly(), clientv3.WithSerializable())
	cancel()
	if err != nil {
		return nil, unreachable(s, err)
	}
	cfg.Client = cli
	return etcd.Open(cfg)
}

// backend is an etcd Locker and its client.
type backend struct {
	*etcd.Locker
	cli   *clientv3.Client
	s     settings
	noted atomic.Bool // Ignored was looked at
}

// Where (cmd.Remote) is what messages name as where the locks are.
func (b *backend) Where() string {
	return "etcd " + strings.Join(b.s.Endpoints, ",") + " under " + b.s.prefix
}

func (b *backend) Close() error {
	return errors.Join(b.Locker.Close(), b.cli.Close())
}

// Query is the Locker's; the first time, it also names on stderr the keys
// of name that block nobody because leaderrun did not write them
// (etcd.Locker.Ignored), so that status shows what is there.
func (b *backend) Query(ctx context.Context, name string) (elect.Snapshot, error) {
	snap, err := b.Locker.Query(ctx, name)
	if err == nil {
		b.noteIgnored(ctx, name)
	}
	return snap, err
}

// QueryAll is Query for every name.
func (b *backend) QueryAll(ctx context.Context) (elect.Snapshot, error) {
	snap, err := b.Locker.QueryAll(ctx)
	if err == nil {
		b.noteIgnored(ctx, "")
	}
	return snap, err
}

func (b *backend) noteIgnored(ctx context.Context, name string) {
	if !b.noted.CompareAndSwap(false, true) {
		return
	}
	keys, err := b.Locker.Ignored(ctx, name)
	if err != nil || len(keys) == 0 {
		return
	}
	more := ""
	if len(keys) > 5 {
		keys, more = keys[:5], fmt.Sprintf(" and %d more", len(keys)-5)
	}
	fmt.Fprintf(os.Stderr, "leaderrun: ignoring %s%s: not written by leaderrun, so they block nobody; remove them (etcdctl del KEY) if they are nobody's\n", strings.Join(keys, ", "), more)
}

// FitGrace is cmd.GraceFitter (remote.Lease.FitGrace).
func (b *backend) FitGrace(grace time.Duration, given bool) (time.Duration, string, error) {
	return b.s.lease.FitGrace(grace, given)
}

// TermToken is what the term's watchdog needs to revoke its lease.
func (b *backend) TermToken(lead *elect.Leadership) (string, error) {
	id, err := b.Lease(lead)
	if err != nil {
		return "", err
	}
	s := b.s
	s.Lease = int64(id)
	j, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	return base64.RawStdEncoding.EncodeToString(j), nil
}

// EndTerm revokes the lease a TermToken names: the watchdog's last act,
// once COMMAND is gone.
func EndTerm(ctx context.Context, token string) error {
	j, err := base64.RawStdEncoding.DecodeString(token)
	if err != nil {
		return fmt.Errorf("etcdcmd: bad term token: %w", err)
	}
	var s settings
	if err := json.Unmarshal(j, &s); err != nil || s.Lease == 0 {
		return fmt.Errorf("etcdcmd: bad term token: %v", err)
	}
	cli, err := s.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	_, err = cli.Revoke(ctx, clientv3.LeaseID(s.Lease))
	return err
}

// ListenBus serves NAME's bus in etcd (etcd/bus.Listen), so that
// members on every host hear the leader.
func (b *backend) ListenBus(lead *elect.Leadership) (cmd.BusServer, error) {
	s, err := etcdbus.Listen(b.Locker, lead)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// DialBus makes a member of NAME's bus in etcd (etcd/bus.Dial).
func (b *backend) DialBus(ctx context.Context, name string, o cmd.BusOptions) (cmd.BusClient, error) {
	c, err := etcdbus.Dial(ctx, b.Locker, name, etcdbus.DialOptions{WaitForLeader: o.WaitForLeader, PublishOnly: o.PublishOnly})
	if err != nil {
		return nil, err
	}
	return c, nil
}

var (
	_ cmd.Remote      = (*backend)(nil)
	_ cmd.BusBackend  = (*backend)(nil)
	_ cmd.TermEnder   = (*backend)(nil)
	_ cmd.HolderEnder = (*backend)(nil)
	_ cmd.GraceFitter = (*backend)(nil)
)
