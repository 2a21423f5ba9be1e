package bus

// DialLazy is Dial that returns at once: the client connects in the
// background when a leader serves, and reconnects as Dial's does. Events
// starts with EventLeader once connected. Until then Publish and Request
// fail with ErrNoLeader, or wait with WaitForLeader.
//
// It is for a process that both campaigns and listens: dialling with
// WaitForLeader before campaigning would wait for a leader that may be
// this very process, and deadlock a group that starts together.
func DialLazy(dir, name string, opts ...DialOption) (*Client, error) {
	c, err := newClient(dir, name, opts)
	if err != nil {
		return nil, err
	}
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
