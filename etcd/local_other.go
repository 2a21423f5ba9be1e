//go:build !linux

package etcd

import (
	"context"
	"errors"
)

// localID is "" where a process's death cannot be waited for: a dead
// waiter's request goes with its lease.
var localID = ""

func waitExit(context.Context, int) error { return errors.ErrUnsupported }
