package bus

import (
	"context"
	"fmt"
	"os"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/oslock"
)

// DialLazy is Dial that returns at once: the client connects in the
// background when a leader serves, and reconnects as Dial's does. Events
// starts with EventLeader once connected. Until then Publish and Request
// fail with ErrNoLeader, or wait with WaitForLeader.
//
// It is for a process that both campaigns and listens: dialling with
// WaitForLeader before campaigning would wait for a leader that may be
// this very process, and deadlock a group that starts together.
func DialLazy(dir, name string, opts ...DialOption) (*Client, error) {
	cfg := dialConfig{buffer: defaultEventBuffer}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.buffer < 1 {
		return nil, fmt.Errorf("bus: EventBuffer %d too small (at least 1)", cfg.buffer)
	}
	if err := elect.ValidateName(name); err != nil {
		return nil, err
	}
	d, err := oslock.OpenDir(dir, oslock.DirOptions{GroupShared: true, AllowUnsafeFS: true})
	if err != nil {
		return nil, err
	}
	c := &Client{dir: d, name: name, cfg: cfg, uid: os.Geteuid(),
		events: make(chan Event, cfg.buffer), changed: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.wg.Add(1)
	go func() {
		s, err := c.await(c.ctx)
		if err != nil {
			close(c.events)
			c.wg.Done()
			return
		}
		c.install(s)
		c.run(s)
	}()
	return c, nil
}
