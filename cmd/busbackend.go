package cmd

import (
	"context"

	"github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
)

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
