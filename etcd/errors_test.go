package etcd

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaderrun/leaderrun/elect"
)

// TestUnavailableForms: every form in which the client library says that
// etcd cannot serve now is elect.ErrUnavailable, so a waiter queues again
// instead of exiting 70; the chaos soak's quorum loss gave the first one
// ("granting a lease: rpc error: code = Unknown desc = context deadline
// exceeded").
func TestUnavailableForms(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("etcd: granting a lease: %w", status.Error(codes.Unknown, "context deadline exceeded")),
		status.Error(codes.Unknown, "context canceled"),
		status.Error(codes.Unavailable, "connection refused"),
		status.Error(codes.DeadlineExceeded, "context deadline exceeded"),
		fmt.Errorf("etcd: %w", status.Error(codes.Canceled, "grpc: the client connection is closing")),
		status.Error(codes.ResourceExhausted, "etcdserver: too many requests"),
		rpctypes.ErrNoLeader, rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrLeaderChanged,
		rpctypes.ErrTimeoutWaitAppliedIndex, rpctypes.ErrStopped, rpctypes.ErrNotLeader, rpctypes.ErrUnhealthy,
		rpctypes.Error(rpctypes.ErrGRPCTimeoutDueToConnectionLost),
		fmt.Errorf("etcd: %w", context.DeadlineExceeded),
	} {
		got := unavailable(err)
		if !errors.Is(got, elect.ErrUnavailable) {
			t.Errorf("unavailable(%q) = %v, not elect.ErrUnavailable", err, got)
		}
		if !errors.Is(got, err) {
			t.Errorf("unavailable(%q) lost the error", err)
		}
	}
	for _, err := range []error{
		rpctypes.ErrRequestTooLarge,
		status.Error(codes.ResourceExhausted, "grpc: trying to send message larger than max (3000000 vs. 2097152)"),
	} {
		if got := unavailable(err); !errors.Is(got, elect.ErrInvalidRequest) || errors.Is(got, elect.ErrUnavailable) {
			t.Errorf("unavailable(%q) = %v, want elect.ErrInvalidRequest", err, got)
		}
	}
	for _, err := range []error{
		errors.New("etcd: grant marker holds garbage"),
		rpctypes.ErrPermissionDenied,
		rpctypes.ErrAuthFailed,
		status.Error(codes.Unknown, "something else"),
		elect.ErrSessionLost,
	} {
		if got := unavailable(err); errors.Is(got, elect.ErrUnavailable) || got != err {
			t.Errorf("unavailable(%q) = %v, want it unchanged", err, got)
		}
	}
}
