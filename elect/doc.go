// Package elect is leader election between processes on one machine, in
// the manner of the Web Locks API (navigator.locks.request and query) that
// browser tabs use, built on kernel flock(2) and a ticketed queue.
//
// A process asks a [Locker] for a name; the request joins the name's queue
// and is granted in turn. The granted request holds a kernel lock on
// <dir>/<name>.lock, which the kernel frees when the process dies, so no
// heartbeat or timeout is involved. The grant is a [Leadership]: a value
// with an epoch (fencing token), a context that ends with the term, and an
// idempotent Release. An [Elector] wraps this into the loop a long-running
// service wants: queue, lead, step down, queue again.
//
// # Guarantees
//
//   - At most one exclusive holder per name and directory at any instant,
//     or any number of shared holders and no exclusive one. The kernel lock
//     decides; the queue only orders who tries.
//   - First come, first served: requests are granted strictly in the order
//     they joined, which is their tickets' number order (numbers are drawn
//     and published under the state file's lock and never reused; a ticket
//     put back after its queue was removed keeps its number), except that
//     a steal goes ahead of everyone (steals' tickets sort before all
//     others, in number order among themselves). A shared request behind a queued exclusive one
//     waits for it, so writers do not starve; consecutive shared requests
//     are granted together.
//   - No stopped process stalls the line: waiters stopped ahead of a
//     running one (SIGSTOP, Ctrl-Z, a debugger, a frozen cgroup), any number
//     of them, are passed once they have left the free lock untaken for
//     [StallBound], however the holder ended; they keep their places ahead
//     of those who joined after them, and are served when they run again.
//     A running waiter is never passed. Whoever ends a term nudges the line
//     when one of its first two waiters is stopped (a release does it; for
//     a holder that died, see [Nudge]). The limit: the two waiters next in
//     line stopped after the ones behind them slept, and a holder that dies
//     with no one to nudge (or the next one stopping right after a release
//     while the one behind it is stopped) leave the lock free until one of
//     them runs again or dies. So does a process stopped in the tens of
//     microseconds it holds the name's state file locked (to join the
//     line, or draw an epoch; a joiner makes its ticket's files before it
//     takes the lock): every join and grant of the name waits for it to
//     run again or die (see docs/guarantees.md for how often a soak
//     meets it).
//   - Epochs only grow: every grant of a name draws an epoch strictly
//     greater than all before it, across crashes, steals, and a state file
//     removed or truncated (the lock file keeps the last epoch as a floor).
//     The floor is also kept as an extended attribute of the lock file,
//     which flock(1)'s idiom 9>FILE (a truncation) leaves. When the whole
//     directory is lost (a reboot wipes a tmpfs, an rm -rf), epochs
//     continue from the wall clock in microseconds: they still grow unless
//     the clock was set back since the last grant. Every epoch is below
//     [MaxEpoch], so it reads the same as an int64, in a shell and in JSON.
//   - On Linux, waiting costs nothing and takes no scarce resource, however
//     many inotify instances the user's other programs hold: a waiter sleeps
//     in ppoll(2) (at most four waits a process; the others in the Go
//     runtime's poller, which takes no thread) until the beacon (a FIFO) of
//     the ticket just ahead of it hangs up, which the kernel makes happen
//     when its owner releases or dies; no inotify instance is used. One
//     release wakes the next waiter and the one behind it. A cancelled or
//     timed-out request leaves no ticket, descriptor or goroutine behind.
//     Only when nothing can be slept on (a lock held by a process
//     /proc/locks does not show) does a request poll (1ms to 100ms), and
//     Query says so. Off Linux a
//     waiter polls (see Platform notes). A holder uses at most the
//     process's one inotify instance, to learn that its lock file was
//     removed, and never the user's last one, and the process's one watch
//     of its mount table; both last as long as the process, with their
//     goroutines oslock.readSentinel and oslock.readMounts, which a goleak
//     test ignores by those names (goleak.IgnoreAnyFunction).
//   - A steal deposes nobody until it is next in line (no steal ahead of
//     it), and nobody once its stealer is gone (dead or given up) before
//     the holder read its notice; then the holders' terms end at once (their contexts end with
//     [ErrStolen]) but the kernel lock passes only when they release it or
//     die; [Request.KillAfter] sends SIGKILL to a holder of the same user
//     that does not let go in time. A steal that gives up after deposing
//     returns [ErrStealAbandoned]; the lock then goes to the next in line.
//   - A contender never leads on a lock file that is not the one at the
//     path: a lock file removed or replaced under a holder makes newcomers
//     take the new one, and they still wait in line behind the holder's
//     ticket. An exclusive holder also claims its name outside the
//     directory ([Leadership.Claim]), and every grant waits until no claim
//     of the name is held: a directory removed, moved, replaced, mounted
//     over or unmounted under a holder never gives a second leader in the
//     one then at the path; the holder notices (inotify and the mount
//     table, watched from PathWatchDelay into the term) and its term ends
//     with [ErrLockLost], and waiters rejoin the
//     new directory in their order. A removed queue directory or state file is made again, and
//     tickets are put back under their numbers, so FIFO goes on.
//   - Query never disturbs anyone: it reads tickets and /proc/locks and
//     takes no lock.
//
// # Failure modes
//
// A suspended holder (SIGSTOP, a debugger) is not a dead one: it keeps the
// lock until it is resumed, killed, or stolen from with KillAfter. Query
// shows it as "stopped".
//
// A holder's term can end (stolen, Locker closed) while its code still runs;
// fence what it writes with the epoch, and have the resource refuse lower
// epochs.
//
// flock between machines is not trusted: a lock directory on NFS, SMB/CIFS,
// FUSE, 9p and similar filesystems gives [ErrUnsupported] naming the
// filesystem, unless the caller opts in with Config.AllowUnsafeFS, or opts
// to degrade with Config.ActAlone (every process then leads alone).
//
// # Files
//
// In the lock directory (default [DefaultDir], mode 0700) each name has
// <name>.lock (never removed; flock(1) on it interoperates; it holds a copy
// of the last epoch), <name>.state (ticket counter and last epoch), and
// <name>.queue/. There each live request has a ticket t<number> (its record,
// flocked by its owner), its beacon t<number>.w and its inbox t<number>.m
// (FIFOs its owner holds open: successors wait for the beacon to hang up,
// stealers write into the inbox); .steal exists while a steal may be
// queued; .yield names the waiter a leader hands the lock to out of turn
// (Elector.YieldTo; stale once that leader's term is over); .tmp-* are
// tickets, beacons, inboxes and .yield being made. Beside them,
// the bus (package bus) serves <name>.sock, bound as <name>.sock.tmp and
// renamed into place, and the leaderrun command keeps a term marker
// <name>.cmd.<id> while a term's COMMAND may run. The module's internal
// package layout holds the only spellings of these names, for elect, bus,
// supervise and the command; `leaderrun lockfile NAME` prints the lock
// file's path. Files persist between uses; what dead
// processes leave is removed by the next process that meets it, or by
// [Locker.Prune]; the socket and markers by the next leader.
//
// The default directory is <home>/.local/state/leaderrun, <home> being the
// effective user's home in the user database, because it is the one place
// that is the same for every process of a user and outlives them all:
// cron sets no XDG_RUNTIME_DIR, sudo and su without "-" keep the caller's
// HOME and XDG_* variables, a service with PrivateTmp=yes has its own /tmp
// and /var/tmp, logind removes /run/user/<uid> at logout (and RemoveIPC=yes
// the user's files in /dev/shm), and systemd-tmpfiles ages out /tmp. So
// DefaultDir reads no environment variable. Users without a home of their
// own, or with a home on NFS or another filesystem Open refuses, get
// /run/lock/leaderrun-<uid> instead (local tmpfs, emptied only at boot);
// DefaultDir lists exactly when. On a system whose /run/lock users may not
// write (Fedora, Arch) such a user must set a directory. Built with
// CGO_ENABLED=0, os/user reads /etc/passwd only: a user known only through
// NSS (LDAP, SSSD, systemd-homed) then gets the fallback, while a cgo build
// finds the home; use one build, or set the directory, for such users. A
// home that is mounted only while its user is logged in (an encrypted or
// systemd-homed home), or hidden from a service (ProtectHome=tmpfs), is seen
// differently by different processes: there, set the directory explicitly
// (Config.Dir; the CLI's --dir or LEADERRUN_DIR) for every process.
//
// # Group-shared directories
//
// With Config.GroupShared, a directory its group may write to (such as mode
// 2770, group team) is shared by every member of that group, whatever their
// uid and primary group: the members take part in one queue as if they were
// one user (first come, first served, IfAvailable and timeouts, steals of a
// holder that lets go, Query showing another member's holder as the
// leaderrun holder it is, with its epoch), and a dead member's ticket is
// removed by whichever member meets it, since the queue directory is
// group-writable without the sticky bit. Everything a member creates there
// gets the directory's group and group access (files 0660, queue
// directories 2770), whatever its umask and primary group, also where the
// directory lacks the setgid bit. The group is trusted as one user: any
// member can remove or rewrite every file there. Not guaranteed: a member
// cannot signal another member's processes (kill(2) needs the same uid), so
// KillAfter does not end another member's holder that will not let go (a
// stopped one), and the CLI's orphan fence cannot end the processes another
// member's killed leaderrun left behind; that member, or root, must. The bus
// stays per-user: its peers are checked by uid.
//
// # Platform notes
//
// A beacon's hang-up wakes a waiter through epoll on Linux. Elsewhere
// (macOS, the BSDs) the Go runtime does not poll FIFOs (kqueue does not
// report a FIFO's last close everywhere), so a waiter polls with a back-off
// of at most 100ms; Query judges liveness by signal 0 instead of
// /proc/locks, and a stopped waiter is not told from a running one.
package elect
