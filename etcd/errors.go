package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/etcd/internal/seam"
)

// unavailable marks an error by which etcd says it cannot serve now (no
// leader, a timeout, not reachable, overloaded) with elect.ErrUnavailable,
// and one by which it refuses a request as too large with
// elect.ErrInvalidRequest. A request that fails so was cleaned up (its key
// deleted, or its session given up) and holds no place in line, so the
// caller may ask again.
//
// The client library reports unavailability in many forms: an etcd error
// (rpctypes), a gRPC status with code Unavailable or DeadlineExceeded, a
// server-side timeout passed on as code Unknown with the text "context
// deadline exceeded" (a lease grant during a quorum loss), or a bare
// context error from a timeout of the library's own. Callers check their
// own context first (its end is theirs to report), so a context error that
// reaches here is one of the library's or the server's.
func unavailable(err error) error {
	switch {
	case err == nil, errors.Is(err, elect.ErrUnavailable), errors.Is(err, elect.ErrInvalidRequest):
		return err
	case seam.TooLarge(err):
		return fmt.Errorf("%w: etcd refused a request as too large (%w); shorten the key prefix, the name or COMMAND's arguments (etcd's --max-request-bytes, 1.5 MiB by default, bounds a request)", elect.ErrInvalidRequest, err)
	case isUnavailable(err):
		return fmt.Errorf("%w: %w", elect.ErrUnavailable, err)
	}
	return err
}

// isUnavailable reports whether err says that etcd could not serve a
// request now, in whichever form the client library gives it.
func isUnavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	for _, e := range []error{rpctypes.ErrNoLeader, rpctypes.ErrNotLeader, rpctypes.ErrLeaderChanged, rpctypes.ErrStopped,
		rpctypes.ErrNotCapable, rpctypes.ErrUnhealthy, rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail,
		rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrTimeoutWaitAppliedIndex, rpctypes.ErrTooManyRequests, rpctypes.ErrNoSpace} {
		if errors.Is(err, e) {
			return true
		}
	}
	code, msg := codes.OK, ""
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code, msg = ee.Code(), ee.Error()
	} else if s, ok := status.FromError(err); ok {
		code, msg = s.Code(), s.Message()
	} else {
		for e := err; e != nil; e = errors.Unwrap(e) {
			if s, ok := status.FromError(e); ok && s.Code() != codes.Unknown {
				code, msg = s.Code(), s.Message()
				break
			}
		}
	}
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted, codes.ResourceExhausted:
		return true
	case codes.Unknown:
		// A server-side context error, passed on as text.
		return strings.Contains(msg, context.DeadlineExceeded.Error()) || strings.Contains(msg, context.Canceled.Error())
	}
	return false
}
