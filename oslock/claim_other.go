//go:build !linux

package oslock

import "context"

func sysMakeClaim(key string) *Claim { return nil }

func sysWaitClaim(ctx context.Context, key string, ok func(uid int) bool) (bool, error) {
	return false, nil
}
