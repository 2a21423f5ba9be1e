//go:build !linux

package oslock

import "context"

func sysWaitClaim(ctx context.Context, key string, ok func(uid int) bool) (bool, error) {
	return false, nil
}

func sysTakeClaim(ctx context.Context, key string, ok func(uid int) bool) (*Claim, error) {
	return nil, nil
}
