package etcd

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/etcd/internal/seam"
)

// The bus over etcd (package etcd/bus) sees a Locker through seam.Core.
func init() {
	seam.Of = func(l any) seam.Core { return core{l.(*Locker)} }
}

type core struct{ l *Locker }

func (c core) Client() *clientv3.Client { return c.l.cli }
func (c core) Base(name string) string  { return c.l.base(name) }
func (c core) Closing() context.Context { return c.l.closing }

func (c core) Closed() bool {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	return c.l.closed
}

func (c core) Owns(lead *elect.Leadership) bool {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	_, ok := c.l.terms[lead]
	return ok
}

func (c core) Session(ctx context.Context) (seam.Session, error) {
	s, err := c.l.session(ctx)
	if err != nil {
		return nil, err
	}
	return sessionSeam{s}, nil
}

func (c core) RPCErr(ctx context.Context, err error) error { return rpcErr(ctx, err) }

type sessionSeam struct{ s *session }

func (s sessionSeam) ID() clientv3.LeaseID     { return s.s.id }
func (s sessionSeam) NextID() string           { return s.s.l.nextID(s.s) }
func (s sessionSeam) Alive() bool              { return s.s.alive() }
func (s sessionSeam) Context() context.Context { return s.s.ctx }
func (s sessionSeam) End(cause error)          { s.s.end(cause, false) }
