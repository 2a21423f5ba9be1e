// Package oslock is the thin layer over the operating system that leaderrun's
// election stands on: advisory whole-file locks (flock(2)), a way to sleep
// until a file is closed, a lock directory that is checked once and then used
// only through its descriptor, and what the kernel says about who holds which
// lock.
//
// # Guarantees
//
//   - A lock taken with [TryLock] belongs to the open file description and is
//     dropped by the kernel when the last descriptor for it is closed, also
//     when the owning process is killed with SIGKILL.
//   - Every file inside a [Dir] is opened relative to the directory's
//     descriptor with O_NOFOLLOW: a symbolic link planted in the directory is
//     refused, never followed.
//   - [OpenDir] refuses a directory that is a symbolic link, is owned by
//     another user, or is writable by others (and by the group unless the
//     caller opts in), and a filesystem on which flock cannot be trusted
//     (NFS, SMB/CIFS, FUSE, 9p, ...), with [ErrUnsupported] naming it.
//   - [WaitHangup] sleeps in the kernel until a beacon (a FIFO, see
//     [Dir.OpenBeacon]) hangs up, which happens when its owner closes it or
//     dies: on Linux it is parked in the Go runtime's poller, costs no CPU,
//     needs no inotify instance, and its context cancels it at once.
//   - A [Watch] tells when a file lost its name; every Watch of a process
//     shares one inotify instance, made on first use and never the user's
//     last one.
//
// # Failure modes
//
// Wake-ups are hints, not facts: a beacon's hang-up says that its owner let
// go of it, not that every lock the owner held is free (a dying process's
// descriptors are torn down one by one). Callers re-try the lock and go
// back to sleep, on a pidfd of the holders /proc/locks names.
//
// # Platform notes
//
// flock is used on darwin, dragonfly, freebsd, illumos, linux, netbsd and
// openbsd; elsewhere the lock calls return [ErrUnsupported]. Beacons are
// waited for in the runtime's poller on Linux; elsewhere the runtime does
// not poll FIFOs (kqueue does not report their last close everywhere), so
// [WaitHangup] falls back to a bounded poll (at most every 100ms). [Watch]
// needs inotify (Linux only; elsewhere [WatchPath] reports ErrUnsupported). /proc/locks, used to
// see who holds a lock without touching it, exists only on Linux; elsewhere
// liveness is judged by signal 0.
package oslock
