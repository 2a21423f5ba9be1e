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
//   - [Watcher.Wait] sleeps in the kernel: on Linux it blocks on inotify and
//     costs no CPU until an event arrives or its context ends.
//
// # Failure modes
//
// Wake-ups are hints, not facts: a close event says that some descriptor of
// the file was closed, not that the lock is free. Callers re-try the lock and
// go back to sleep.
//
// # Platform notes
//
// flock is used on darwin, dragonfly, freebsd, illumos, linux, netbsd and
// openbsd; elsewhere the lock calls return [ErrUnsupported]. Close events come
// from inotify on Linux. Other platforms have no event for "the last
// descriptor was closed", so [Watcher.Wait] there falls back to a bounded
// poll (at most every 100ms), and documents it as such. /proc/locks, used to
// see who holds a lock without touching it, exists only on Linux; elsewhere
// liveness is judged by signal 0.
package oslock
