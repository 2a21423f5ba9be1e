package cmd

import (
	"context"
	"errors"
	"time"

	"github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
)

// This file is the backend seam, the whole of it: what a backend of the
// command line must do (Backend), how the app opens it (WithBackend), and
// what it may do besides, as named capabilities that the commands look
// for (LockDir, Remote, BusBackend, TermEnder, HolderEnder, GraceFitter).
// No other file of cmd asks a Backend for more than Backend's methods:
// they go through opened, below.
//
// The flock backend is elect.Locker, used when no WithBackend is given;
// leaderrun-etcd (etcd/etcdcmd) and leaderrun-pg (pg/pgcmd) are the
// others.

// Backend is what every backend must do: elect's election, for any name,
// in elect's terms. The conformance suite, elect/electtest.Run, is the
// executable definition of Acquire, Query and QueryAll (Query for every
// name; a backend's own tests run it). Close ends every request still
// waiting (elect.ErrClosed), releases every leadership it granted and
// frees it, as elect.Locker's does. *elect.Locker is a Backend (and a
// LockDir).
type Backend interface {
	Acquire(ctx context.Context, name string, r elect.Request) (*elect.Leadership, error)
	Query(ctx context.Context, name string) (elect.Snapshot, error)
	QueryAll(ctx context.Context) (elect.Snapshot, error)
	Close() error
}

// Opener opens the app's Backend for one command line. flag gives the
// values of the backend's own flags (WithBackend) and of --grace.
type Opener func(flag FlagValue) (Backend, error)

// WithBackend makes the commands elect over the Backend that open returns
// instead of elect.Open's, and adds flags, the backend's own, to the app
// and to every subcommand (leaderrun-etcd's --etcd-endpoints). The
// commands keep what they need on this host (term markers, the watchdog,
// the Unix-socket bus, LEADERRUN_DIR) in the lock directory of --dir,
// LEADERRUN_DIR or the default, which they open themselves for a Backend
// that is not a LockDir.
func WithBackend(open Opener, flags ...BackendFlag) Option {
	return func(a *App) {
		a.open = open
		a.flags = append(a.flags, flags...)
	}
}

// WithTermEnder gives the app, when it runs as a term's watchdog, the
// function that ends a term from its TermToken (see TermEnder).
func WithTermEnder(end func(ctx context.Context, token string) error) Option {
	return func(a *App) { a.ender = end }
}

// TermEndPreparer readies ahead, while a term runs, the end its watchdog
// may have to make: a backend whose WithTermEnder function connects to a
// server each time (PostgreSQL: a connection and an authentication, many
// milliseconds) connects while COMMAND runs instead, so that ending the
// term once COMMAND is gone is one round trip. It is optional; give it
// with WithTermEndPreparer beside WithTermEnder.
type TermEndPreparer interface {
	// PrepareTermEnd is called by the watchdog when it learns the term's
	// token, and returns at once (it readies in the background). end
	// ends the term as the WithTermEnder function would, over what was
	// readied if that still serves and afresh otherwise: what was readied
	// failing, or gone stale (the server ended an idle connection), must
	// not fail the end. release frees what was readied. The watchdog
	// calls end (then release) only once COMMAND is gone, or release
	// alone when the term ended cleanly.
	PrepareTermEnd(token string) (end func(ctx context.Context) error, release func())
}

// WithTermEndPreparer gives the app's watchdog a TermEndPreparer.
func WithTermEndPreparer(p TermEndPreparer) Option {
	return func(a *App) { a.prepare = p }
}

// BackendFlag is a flag that a backend adds to the command line
// (WithBackend), on the app and on every subcommand, such as
// leaderrun-etcd's --etcd-endpoints.
type BackendFlag struct {
	Name  string
	Usage string
	// EnvVar is read when the flag is not given; "" for none.
	EnvVar string
	// Value is the default, when neither the flag nor EnvVar is set.
	Value string
	// Bool makes it a switch that takes no value.
	Bool bool
}

// FlagValue returns the value of one of the backend's flags for the
// command line being run: as given to the innermost command that has it,
// else its EnvVar's, else its Value. A Bool flag's value is "true" or
// "false". For another flag of the command line that takes a duration,
// such as grace, it returns its value, or "" where the command has no
// such flag.
type FlagValue func(name string) string

// The capabilities: what a Backend may do besides. The commands find them
// by type assertion on the Backend that the Opener returned.

// LockDir is a Backend whose locks are files in a lock directory on this
// host, Dir: flock(2)'s, as elect.Locker's. The commands keep their term
// markers beside the locks (the fence of a dead holder reads who holds
// the lock file), serve the Unix-socket bus there, and leaderrun lockfile
// prints the lock file's path, for flock(1).
type LockDir interface {
	Dir() string
}

// Remote is a Backend whose locks are elsewhere than a lock directory of
// this host: Where names them in messages (leaderrun-etcd: "etcd URLS
// under PREFIX"). Without it, messages name the lock directory.
type Remote interface {
	Where() string
}

// BusBackend is a Backend that carries NAME's bus itself, such as etcd's,
// whose leader and members are on many hosts. The commands use its bus for
// publish, subscribe, who's leader events and --fanout; for a Backend that
// is not a BusBackend they use the Unix-socket bus in the lock directory
// (package bus).
type BusBackend interface {
	// ListenBus serves the bus of lead's name for as long as the term
	// lasts; only an exclusive leadership serves one.
	ListenBus(lead *elect.Leadership) (BusServer, error)
	// DialBus connects a member to the bus of name. It fails with
	// bus.ErrNoLeader when nobody leads, unless o.WaitForLeader.
	DialBus(ctx context.Context, name string, o BusOptions) (BusClient, error)
}

// BusOptions are a member's choices, as bus.WaitForLeader and
// bus.PublishOnly are for the Unix-socket bus.
type BusOptions struct {
	// WaitForLeader makes DialBus wait for a leader rather than fail.
	WaitForLeader bool
	// PublishOnly: the member only publishes and wants no messages.
	PublishOnly bool
}

// BusServer is the leader's side of a bus (*bus.Server for the
// Unix-socket bus). Publish must not wait for members.
type BusServer interface {
	Publish(data []byte) (seq uint64, err error)
	Serve(ctx context.Context) error
}

// BusClient is a member's side of a bus (*bus.Client for the Unix-socket
// bus), with the same events, errors (bus.ErrNoLeader,
// bus.ErrLeaderChanged, bus.ErrTooLarge) and order.
type BusClient interface {
	Events() <-chan bus.Event
	Publish(ctx context.Context, data []byte) error
	Close() error
}

// TermEnder is a Backend whose terms outlive a leaderrun that dies or
// stops unless someone ends them: an etcd term lasts until its lease
// expires, TTL after the last renewal. leaderrun hands each term's token
// to the term's watchdog (a process of its own, see package supervise),
// which, once it has stopped COMMAND because leaderrun died or stopped
// renewing the term, ends the term with the app's WithTermEnder function,
// so that the next holder, on any host, need not wait for the TTL.
type TermEnder interface {
	// TermToken returns one line, without a newline, from which the
	// WithTermEnder function ends lead's term in another process of the
	// same user. It may hold credentials: it travels over a pipe only.
	TermToken(lead *elect.Leadership) (string, error)
}

// HolderEnder is a BusBackend whose terms outlive a holder that died until
// they expire (etcd's lease, TTL after the last renewal), and that can end
// one at once. A leaderrun waiting in line on the same host as such a
// holder (it learns of the holder from the bus's leader events) learns of
// its death from the kernel and ends its term, so that the next holder,
// on any host, need not wait for the TTL; the term's watchdog does the
// same, and this is for when it died too.
type HolderEnder interface {
	// EndHolder ends h's term of name, if it is still one (the same pid,
	// host and epoch), once the caller knows h's leaderrun is dead and its
	// COMMAND gone.
	EndHolder(ctx context.Context, name string, h elect.Holder) error
}

// GraceFitter is a Backend whose terms leave COMMAND only so long to stop
// (leaderrun-etcd: within half the lease TTL). After Open, the run command
// takes the --grace it returns: grace itself when it fits; when it does
// not, a shorter one if --grace was not given (given false; note says why,
// for -v), else an error to exit with.
type GraceFitter interface {
	FitGrace(grace time.Duration, given bool) (fit time.Duration, note string, err error)
}

// opened is the app's Backend for one command line, with the lock
// directory of this host that the commands use beside it: the Backend's
// own (LockDir) or, for another Backend, --dir's, opened for it. Every
// capability the commands use is asked for here.
type opened struct {
	b     Backend
	dir   string        // the lock directory: term markers, the watchdog, the Unix-socket bus, LEADERRUN_DIR
	local *elect.Locker // --dir's lock directory, opened for a Backend that is no LockDir
}

// openBackend opens b's companion lock directory, as cfg says, unless b
// is a LockDir itself. b is closed if that fails.
func openBackend(b Backend, cfg elect.Config) (*opened, error) {
	if ld, ok := b.(LockDir); ok {
		return &opened{b: b, dir: ld.Dir()}, nil
	}
	local, err := elect.Open(cfg)
	if err != nil {
		b.Close()
		return nil, err
	}
	return &opened{b: b, dir: local.Dir(), local: local}, nil
}

func (o *opened) Acquire(ctx context.Context, name string, r elect.Request) (*elect.Leadership, error) {
	return o.b.Acquire(ctx, name, r)
}

func (o *opened) Query(ctx context.Context, name string) (elect.Snapshot, error) {
	return o.b.Query(ctx, name)
}

func (o *opened) QueryAll(ctx context.Context) (elect.Snapshot, error) { return o.b.QueryAll(ctx) }

// Dir is the lock directory of this host that the commands use.
func (o *opened) Dir() string { return o.dir }

func (o *opened) Close() error {
	err := o.b.Close()
	if o.local != nil {
		err = errors.Join(err, o.local.Close())
	}
	return err
}

// where names, in messages, where the locks are: a Remote says; else the
// lock directory.
func (o *opened) where() string {
	if r, ok := o.b.(Remote); ok {
		return r.Where()
	}
	return o.dir
}

// flock reports whether the locks are flock(2) files in the lock
// directory (leaderrun lockfile).
func (o *opened) flock() bool {
	_, ok := o.b.(LockDir)
	return ok
}

// ownBus reports whether the Backend carries the bus itself.
func (o *opened) ownBus() bool {
	_, ok := o.b.(BusBackend)
	return ok
}

// bus returns the bus the commands use: the Backend's own if it is a
// BusBackend, else the Unix-socket bus in the lock directory.
func (o *opened) bus() busPort {
	if b, ok := o.b.(BusBackend); ok {
		return b
	}
	return unixBus{dir: o.dir}
}

// holderEnder is the Backend as a HolderEnder with its own bus, whose
// leader events name the holders whose death a waiter can watch for.
func (o *opened) holderEnder() (HolderEnder, BusBackend, bool) {
	he, ok := o.b.(HolderEnder)
	b, own := o.b.(BusBackend)
	return he, b, ok && own
}

// termToken is the Backend's TermToken for lead, "" if it is no
// TermEnder or has none.
func (o *opened) termToken(lead *elect.Leadership) string {
	if te, ok := o.b.(TermEnder); ok {
		if tok, err := te.TermToken(lead); err == nil {
			return tok
		}
	}
	return ""
}

// fitGrace is the Backend's FitGrace; grace as it is for a Backend that
// is no GraceFitter.
func (o *opened) fitGrace(grace time.Duration, given bool) (time.Duration, string, error) {
	if gf, ok := o.b.(GraceFitter); ok {
		return gf.FitGrace(grace, given)
	}
	return grace, "", nil
}
