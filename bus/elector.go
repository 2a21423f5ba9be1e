package bus

import (
	"context"
	"errors"

	"github.com/leaderrun/leaderrun/elect"
)

// RunElector runs e (see elect.Elector.Run) with a lead function that gets
// the term's serving Server: the bus is served from the moment the term
// begins until lead returns, and lead's ctx ends when the term does. It
// saves every leader the Listen, Serve and Close around its work. opts go
// to Listen; e must ask for an exclusive lock.
func RunElector(ctx context.Context, e *elect.Elector, lead func(ctx context.Context, l *elect.Leadership, s *Server) error, opts ...ServerOption) error {
	if lead == nil {
		return errors.New("bus: RunElector needs a lead function")
	}
	return e.Run(ctx, func(ctx context.Context, l *elect.Leadership) error {
		s, err := Listen(l, opts...)
		if err != nil {
			return err
		}
		sctx, stop := context.WithCancel(ctx)
		served := make(chan struct{})
		go func() {
			defer close(served)
			s.Serve(sctx)
		}()
		defer func() {
			stop()
			<-served
		}()
		return lead(ctx, l, s)
	})
}
