package oslock

// Event selects what a [Watcher] wakes up for.
type Event uint32

const (
	// Closed wakes when any descriptor of the file that was open for
	// writing is closed, including by the death of its process. Owners of
	// leaderrun's lock files open them for writing, readers do not, so a
	// reader never causes this wake-up.
	Closed Event = 1 << iota
	// ClosedAny wakes on the close of any descriptor, read-only ones
	// included (flock(1) opens its file read-only).
	ClosedAny
	// Gone wakes when the file loses a name (unlink, rename) or changes
	// attributes.
	Gone
)
