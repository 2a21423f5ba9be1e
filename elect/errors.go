package elect

import (
	"errors"

	"github.com/leaderrun/leaderrun/oslock"
)

// Sentinel errors, checked with errors.Is.
var (
	// ErrBusy: a try-only request found the lock held or the queue not
	// empty.
	ErrBusy = errors.New("elect: lock is held")
	// ErrStolen ends a leadership that another request took with Steal.
	ErrStolen = errors.New("elect: leadership was stolen")
	// ErrStealAbandoned: a steal's context ended after it had deposed the
	// holders but before it was granted. The holders' terms have ended;
	// the lock goes to whoever is next in line.
	ErrStealAbandoned = errors.New("elect: steal abandoned after deposing the holder")
	// ErrForeignHolder: a steal's KillAfter ran out while a holder of
	// another user (in a group-shared directory) still held the lock;
	// kill(2) allows no process to end another user's. The message names
	// the pid and uid.
	ErrForeignHolder = errors.New("elect: the holder belongs to another user")
	// ErrLockLost ends a leadership whose lock file is no longer the one
	// at the path (removed or replaced, or its directory moved or
	// removed): newcomers would lock another file, and flock(1) on the
	// path would not be excluded. The holder still holds the old file's
	// lock until it releases; newcomers wait for that. The holder learns
	// of it at once, or PathWatchDelay (10ms) into its term when it
	// happened before.
	ErrLockLost = errors.New("elect: lock file was removed or replaced")
	// ErrNeverLed: Elector.Run's context ended before it was granted
	// leadership even once (a clean stop after leading returns nil).
	ErrNeverLed = errors.New("elect: stopped before leading")
	// ErrStaleEpoch: a Fence refused an epoch lower than one it has
	// accepted: the caller's term has been superseded.
	ErrStaleEpoch = errors.New("elect: stale epoch, a later leader has written")
	// ErrClosed: the Locker was closed; waiting requests end with it.
	ErrClosed = errors.New("elect: locker is closed")
	// ErrSessionLost ends a leadership, or a waiting request, whose
	// session with a distributed backend (an etcd lease) expired or could
	// not be renewed in time, or whose keys were removed by someone else.
	// Another holder may already exist: stop acting as the leader. The
	// flock backend never returns it.
	ErrSessionLost = errors.New("elect: session with the lock service was lost")
	// ErrUnavailable: a distributed backend's service could not be
	// reached or answer in time (etcd without a quorum, a timeout). A
	// request that fails with it holds no place in line and may be made
	// again. The flock backend never returns it.
	ErrUnavailable = errors.New("elect: the lock service is unavailable")
	// ErrReleased ends a leadership that its holder released.
	ErrReleased = errors.New("elect: leadership released")
	// ErrInvalidName: the name is empty, too long, or has characters
	// outside [A-Za-z0-9._@+=,:-], or starts with a dot or a dash.
	ErrInvalidName = errors.New("elect: invalid lock name")
	// ErrInvalidRequest: a meaningless combination of request options,
	// such as Steal with IfAvailable or with Shared.
	ErrInvalidRequest = errors.New("elect: invalid request")
	// ErrCorrupt: a file of the lock directory holds something that
	// leaderrun did not write. Nothing is changed; the message names the
	// file and how to recover.
	ErrCorrupt = errors.New("elect: corrupt lock state")
	// ErrUnsupported: flock cannot be trusted on this platform or
	// filesystem. Same value as oslock.ErrUnsupported.
	ErrUnsupported = oslock.ErrUnsupported
	// ErrInsecureDir: the lock directory could be tampered with by
	// others. Same value as oslock.ErrInsecureDir.
	ErrInsecureDir = oslock.ErrInsecureDir
)
