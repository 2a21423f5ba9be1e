package cmd

import (
	"context"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/urfave/cli/v3"
)

// cmdSession is what who, status, publish and subscribe start with: NAME,
// checked; the lock directory, opened; and a context that ends on SIGINT,
// SIGTERM or SIGHUP (signalContext). End it with close.
type cmdSession struct {
	name string
	lk   *opened // nil after begin(..., keepOpen=false)
	dir  string  // lk.Dir()
	bus  busPort // NAME's bus: lk's own (kept open) or the Unix socket's in dir
	ctx  context.Context
	stop context.CancelFunc
}

// begin is the one prologue of the subcommands: name (which may be empty
// only for status) is checked with elect.ValidateName, the lock directory
// of c is opened, and errors get their exit code and one line that says
// what to do. Without keepOpen the directory is closed again at once
// (publish and subscribe only need its path to find the Unix-socket bus),
// unless the backend carries the bus itself (BusBackend).
func begin(ctx context.Context, c *cli.Command, cmd, name string, keepOpen bool) (*cmdSession, error) {
	if name != "" || cmd != "status" {
		if err := elect.ValidateName(name); err != nil {
			return nil, usageErrorf("leaderrun %s: %v", cmd, err)
		}
	}
	lk, err := openLocker(c)
	if err != nil {
		return nil, explainCtx(c, err)
	}
	s := &cmdSession{name: name, lk: lk, dir: lk.Dir()}
	s.bus = lk.bus()
	if !keepOpen && !lk.ownBus() {
		lk.Close()
		s.lk = nil
	}
	s.ctx, s.stop = signalContext(ctx)
	return s, nil
}

func (s *cmdSession) close() {
	s.stop()
	if s.lk != nil {
		s.lk.Close()
	}
}

// fail is the error to return for err met by the cmdSession: the signal's
// exit status when a signal ended it, else err explained for c's lock
// directory.
func (s *cmdSession) fail(c *cli.Command, err error) error {
	if e := signalExit(s.ctx); e != nil {
		return e
	}
	return explainCtx(c, err)
}
