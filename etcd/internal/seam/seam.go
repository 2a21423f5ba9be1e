// Package seam is what package etcd/bus needs of an etcd.Locker, kept out
// of package etcd's exported API: package etcd implements Core and sets
// Of when it is initialised.
package seam

import (
	"context"
	"errors"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/elect"
)

// Core is a Locker as its bus sees it.
type Core interface {
	// Client is the Locker's etcd client.
	Client() *clientv3.Client
	// Base is the prefix of name's keys, P/N/.
	Base(name string) string
	// Closing ends when the Locker is closed.
	Closing() context.Context
	// Closed reports whether the Locker is closed.
	Closed() bool
	// Owns reports whether lead was granted by this Locker and is still
	// tracked by it.
	Owns(lead *elect.Leadership) bool
	// Session returns the Locker's live session, granting a lease when
	// there is none.
	Session(ctx context.Context) (Session, error)
	// RPCErr is the error to return for err, an etcd request's failure
	// under ctx: ctx's cause if it ended, else err marked as the Locker
	// marks unavailability (elect.ErrUnavailable) and requests too large.
	RPCErr(ctx context.Context, err error) error
}

// Session is a Locker's lease.
type Session interface {
	// ID is the lease.
	ID() clientv3.LeaseID
	// NextID is a key id never used before: the lease and a counter.
	NextID() string
	// Alive reports whether the session lives (its deadline has not
	// passed, it was not ended).
	Alive() bool
	// Context ends with the session.
	Context() context.Context
	// End ends the session with cause; its lease is left to expire.
	End(cause error)
}

// Key directories under a name's base that the bus reads.
const (
	DirHeld  = "held/"
	DirSteal = "steal/"
)

// Of returns the Core of l, an *etcd.Locker; package etcd sets it.
var Of func(l any) Core

// TooLarge reports whether etcd or gRPC refused a write for its size.
func TooLarge(err error) bool {
	// gRPC's own limit (codes.ResourceExhausted) says "message larger
	// than max".
	return errors.Is(err, rpctypes.ErrRequestTooLarge) ||
		strings.Contains(err.Error(), "request is too large") ||
		strings.Contains(err.Error(), "message larger than max")
}
