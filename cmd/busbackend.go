package cmd

import (
	"context"

	"github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
)

// BusBackend is a Backend that carries NAME's bus itself, such as etcd's,
// whose leader and members are on many hosts. The commands use its bus for
// publish, subscribe, who's leader events and --fanout; for a Backend that
// is not a BusBackend they use the Unix-socket bus in its lock directory
// (package bus).
type BusBackend interface {
	Backend
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

// where names, in messages, where lk keeps its locks: a backend that is no
// lock directory says so with a Where method (etcd: its endpoints and
// prefix); else its Dir.
func where(lk Backend) string {
	if w, ok := lk.(interface{ Where() string }); ok {
		return w.Where()
	}
	return lk.Dir()
}

// busOf returns the bus the commands use for lk: its own if it is a
// BusBackend, else the Unix-socket bus in dir.
func busOf(lk Backend, dir string) busPort {
	if b, ok := lk.(BusBackend); ok {
		return b
	}
	return unixBus{dir: dir}
}

// busPort is the part of BusBackend the commands call.
type busPort interface {
	ListenBus(lead *elect.Leadership) (BusServer, error)
	DialBus(ctx context.Context, name string, o BusOptions) (BusClient, error)
}

// unixBus is package bus in a lock directory.
type unixBus struct{ dir string }

func (unixBus) ListenBus(lead *elect.Leadership) (BusServer, error) {
	srv, err := bus.Listen(lead)
	if err != nil {
		return nil, err
	}
	return srv, nil
}

func (u unixBus) DialBus(ctx context.Context, name string, o BusOptions) (BusClient, error) {
	var opts []bus.DialOption
	if o.WaitForLeader {
		opts = append(opts, bus.WaitForLeader())
	}
	if o.PublishOnly {
		opts = append(opts, bus.PublishOnly())
	}
	cl, err := dialBus(ctx, u.dir, name, opts...)
	if err != nil {
		return nil, err
	}
	return cl, nil
}
