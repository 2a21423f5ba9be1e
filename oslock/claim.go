package oslock

import (
	"context"
	"os"
)

// A Claim is a registration that lives outside any directory: on Linux a
// listening socket in the abstract namespace, bound under a key, which
// the kernel frees when its last descriptor closes (its owner released it
// or died, and nothing it handed the descriptor to still has it). It lets
// a lock holder keep a name fenced when the directory that held its lock
// file is removed, moved or mounted over: a newcomer in the directory now
// at the path takes it with [TakeClaim], which waits for the old
// holder's, before it leads.
//
// What it cannot see: the abstract namespace is per network namespace, so
// a process in another one (a service with PrivateNetwork=yes) neither
// sees nor is seen; and the key can be squatted by another user, whose
// claim is then ignored (its peer's uid is checked) while ours cannot be
// made. Off Linux there are no claims: TakeClaim returns nil and WaitClaim
// reports none.
type Claim struct {
	f *os.File
}

// File returns the claim's descriptor, so that another process that must
// keep the fence (a watchdog) can be given it; nil for a nil Claim.
func (c *Claim) File() *os.File {
	if c == nil {
		return nil
	}
	return c.f
}

// Close gives the claim up (other copies of its descriptor keep it).
func (c *Claim) Close() error {
	if c == nil {
		return nil
	}
	return c.f.Close()
}

// TakeClaim binds the claim key for this process once no other holder
// has it, waiting for each claim whose owner's uid ok accepts to go, so
// that of two holders that take the key, one waits for the other. It
// returns nil without an error where there are no claims, or when the
// key is squatted (held by a uid ok refuses).
func TakeClaim(ctx context.Context, key string, ok func(uid int) bool) (*Claim, error) {
	return sysTakeClaim(ctx, key, ok)
}

// WaitClaim blocks until nobody holds the claim key, or ctx ends. A claim
// whose owner's uid ok refuses is not ours (another user squats the key)
// and is ignored. held reports whether it had to wait.
func WaitClaim(ctx context.Context, key string, ok func(uid int) bool) (held bool, err error) {
	return sysWaitClaim(ctx, key, ok)
}
