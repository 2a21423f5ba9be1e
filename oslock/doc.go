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
// flock(2) is used on darwin, dragonfly, freebsd, illumos, linux, netbsd
// and openbsd; every other platform builds, and every call there returns
// [ErrUnsupported]. Network and FUSE filesystems are refused on all seven:
// on Linux by statfs(2)'s filesystem magic, elsewhere by the filesystem's
// type name (fstatfs(2), or fstatvfs(2) on netbsd and illumos).
//
// Beacons are waited for in the runtime's poller on Linux; elsewhere the
// runtime does not poll FIFOs (kqueue does not report their last close
// everywhere), so [WaitHangup] falls back to a bounded poll (at most every
// 100ms). [Watch] needs inotify (Linux only; elsewhere [WatchPath] reports
// ErrUnsupported). /proc/locks, used to see who holds a lock without
// touching it, and pidfds exist only on Linux; elsewhere liveness is
// judged by signal 0. On darwin (no mkfifoat) a beacon is made by path and
// on illumos (no linkat in x/sys) a ticket is linked by path; both are
// then opened through the directory's descriptor with O_NOFOLLOW.
//
// Where the kernel has no flock(2) (Windows has LockFileEx, AIX and
// Oracle Solaris only fcntl locks), github.com/gofrs/flock could take the
// lock, but the lock alone is not what an election needs here: waiting
// sleeps on FIFOs that hang up when their owner dies, files are opened
// relative to a checked directory descriptor, and holders are told apart
// by process state. fcntl locks, moreover, belong to the process, not to
// the open file: two requests of one process would both be granted, and
// closing any descriptor of the file drops the lock. So those platforms
// answer ErrUnsupported rather than promise less than the doc says.
//
// # Files
//
// Each file suffix has one meaning: X_linux.go, X_darwin.go, ... are Go's
// own GOOS suffixes; X_flock.go carries the build list of the seven flock
// platforms above; unsupported.go is the exact complement of the flock
// list; X_other.go is for every platform that neither a sibling
// X_GOOS.go nor unsupported.go covers. Every exported name is declared, with its doc comment, in a
// file without a suffix, so that go doc reads the same on every GOOS.
package oslock
