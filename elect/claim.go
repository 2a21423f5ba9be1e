package elect

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strconv"

	"github.com/leaderrun/leaderrun/oslock"
)

// An exclusive holder also claims its name outside the lock directory
// (oslock.Claim: an abstract socket on Linux), keyed by the directory's
// path and the name. The claim stays while the holder's work may go on,
// even when the directory is removed, moved, replaced, mounted over or
// unmounted, and every grant waits until no claim of the same key is held
// (an exclusive one takes the key in that same step: claim, below).
// So a newcomer in the directory now at the path, where no queue, state or
// lock file tells it of the old holder (a fresh one, or one that an
// unmount uncovers with an older state), still does not lead beside it:
// it leads once the old holder has released (the leaderrun command: once
// its COMMAND is gone). In a directory that was not replaced the kernel
// lock already excludes the two; there the claim costs a bind (a shared
// grant's wait, a refused connect), a few microseconds a grant.
//
// What a claim cannot see is said at oslock.Claim: a holder in another
// network namespace, and a key squatted by another user. Shared terms are
// not claimed: a name's shared holders would need one key each.

// claimKey is the claim's key for name. It is the lock directory's path
// and the name, except in the default directory, whose key does not depend
// on the path: a user's default is in the home, or in the fallback while
// there is no usable home (see DefaultDir), and a home that appears (or
// goes) during a term must not let a name be led in both at once.
func (l *Locker) claimKey(name string) string {
	key := l.path + "\x00" + name
	if l.cfg.Dir == "" {
		key = "default\x00" + strconv.Itoa(os.Geteuid()) + "\x00" + name
	}
	sum := sha256.Sum256([]byte(key))
	return "leaderrun/v1/" + hex.EncodeToString(sum[:16])
}

// testAfterClaim, when set by a test, runs in a grant right after its
// claim step.
var testAfterClaim func(name string)

// claim waits until no holder of this user (or, in a group-shared
// directory, of any user) claims the name, and for an exclusive request
// takes the claim in that same step (nil where claims cannot be made).
// Waiting and then claiming in two steps would let two holders of
// directories that were at the path one after the other both find the
// key free and both lead.
func (a *acquirer) claim(ctx context.Context) (*oslock.Claim, error) {
	me := os.Geteuid()
	ok := func(uid int) bool { return uid == me || a.l.group }
	if a.req.Mode != Exclusive {
		_, err := oslock.WaitClaim(ctx, a.l.claimKey(a.name), ok)
		return nil, err
	}
	return oslock.TakeClaim(ctx, a.l.claimKey(a.name), ok)
}
