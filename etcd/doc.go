// Package etcd is leaderrun's election over etcd, for contenders on many
// hosts: the contract of package elect (exclusive and shared modes, strict
// FIFO, steals, fencing epochs, a queue that can be listed) kept by an etcd
// cluster instead of flock(2). A [Locker] satisfies [elect.Backend], so an
// [elect.Elector] runs on it unchanged, and it passes elect/electtest.
//
// It is a module of its own (github.com/leaderrun/leaderrun/etcd), so that
// the leaderrun binary and the elect package never link the etcd client.
//
// Each Locker has one session: an etcd lease of Config.TTL (default 10s,
// at least 2s) that its own loop renews with KeepAliveOnce three times per
// TTL less Config.Margin. A request is a key on that lease; its creation
// revision is its ticket. A grant is one txn that checks the request key's
// creation revision, the epoch key's last write and an empty steal lane,
// and writes the new epoch and a grant marker. A release whose successor is
// an exclusive request writes the successor's grant in its own txn, under
// the same guards, so a handover costs one round trip. Each waiter watches
// only the request ahead of it and its own key, as concurrency.Mutex
// does, so a hand-off sends one watch event, to the waiter behind, however
// long the queue (BenchmarkDrain). Keys under a name's q/, steal/ or
// held/ that leaderrun did not write (another application's whose prefix
// nests in ours, a typo, an older version's) are no requests: they block
// nobody, Query leaves them out and Locker.Ignored lists them. Waiters watch from
// the server's current revision: etcd serves a watch that starts in the
// past from a sweep that runs every 100ms, which is where the waiters of
// concurrency.Election spend most of a handover. See keys.go for the
// layout.
//
// # Guarantees
//
//   - At most one exclusive holder per name and prefix, or any number of
//     shared holders and no exclusive one, among holders whose terms have
//     not ended. Every grant is a txn that etcd commits through raft, so it
//     holds across members, restarts and leader changes.
//   - First come, first served by the request key's creation revision,
//     except that a steal goes ahead of everyone; a shared request waits
//     for a queued exclusive one ahead of it (the Web Locks rule: writers
//     do not starve), and consecutive shared requests are granted together.
//   - Epochs strictly grow per name and prefix, across crashes, steals,
//     leader changes and restarts: each grant writes max(last+1, the wall
//     clock in microseconds) to the epoch key in the grant txn, the flock
//     backend's scale. When the whole prefix is deleted, epochs continue
//     from the clock of the host that grants next: they still grow unless
//     that host's clock is behind the last grant's.
//   - A holder learns it lost before anyone else can be granted: its term
//     ends by its own monotonic clock at the send time of the last
//     acknowledged renewal plus the granted TTL less the margin, which is
//     before the server can expire the lease, whatever the network does.
//     It also ends at once when its keys are deleted (elect.ErrSessionLost)
//     or a steal arrives (elect.ErrStolen).
//   - No phantom grants: a waiter whose key vanished (its lease expired or
//     was revoked, or someone deleted it) gets elect.ErrSessionLost and is
//     never granted; etcd's own concurrency.Election.Campaign returns nil
//     there (etcd-io/etcd#11051). Every grant and delete is guarded by the
//     key's creation revision, so a late or repeated release never deletes
//     a newer request's keys (etcd-io/etcd#22082).
//   - A cancelled or timed-out request deletes its key. If etcd cannot be
//     reached to do so, the Locker gives up its session, so the key goes
//     with the lease within the TTL; nothing outlives the session's TTL.
//   - Query reads one revision and writes nothing.
//
// # Bus
//
// A name's bus (who leads, ordered fan-out within a term, requests to the
// leader: package bus's contract, for members on any host) runs over the
// same etcd: the exclusive holder serves it with [github.com/leaderrun/leaderrun/etcd/bus.Listen],
// members join with [github.com/leaderrun/leaderrun/etcd/bus.Dial]. Every write of a term is guarded by
// that term's grant, so nothing published to a term that has ended lands
// in it or in a later one; each member follows the name with one Watch,
// so a term's EventLost comes after all of its messages, and a member
// that loses history to a compaction is told with Gap. Each message is a
// raft commit delivered to every watcher of the name and kept in etcd's
// history until compaction: the bus is for control traffic, not for data
// streams. On a one-member etcd on loopback, publish→receive takes about
// 1.5 times a plain Put seen by a Watch, and the leader's queue commits
// about half as many messages per second as sequential Puts (0.35-0.4ms
// and 2,000-3,000 messages/s here; BenchmarkBus measures both side by
// side).
//
// # Failure modes and non-guarantees
//
// A paused process is the danger of every multi-host lock. A holder that
// is stopped (SIGSTOP, a debugger, a long GC pause, a frozen VM) past its
// deadline cannot tell anyone: its lease expires on the server, the next
// in line is granted, and when the paused process runs again it may
// execute a write or two before its own timer ends its term. No lock can
// prevent that; only the resource written to can. So epochs are mandatory
// here, not an option: pass Leadership.Epoch with every write and have the
// resource refuse an epoch lower than one it has accepted (Kleppmann's
// fencing token; etcd's contrib/lock/README.md says the same).
//
// A grant is taken up only once it is confirmed current: before Acquire
// returns a Leadership (and so before leaderrun starts COMMAND), a
// linearizable txn checks that the request key still has its ticket and
// the grant marker is the one made for it on this session's lease, and
// the lease's time to live, asked of the raft leader, is at least the
// margin; answers that take longer than max(Margin/2, 250ms) are asked
// again. A grant learned late (from a member that was stopped while this
// process's renewals reached the others) and ended meanwhile is refused
// with elect.ErrSessionLost, and the request queues again. Every watch of
// the lock path asks for a progress notice after a silence of
// clamp((TTL-Margin)/4, 0.5s, 2s) and, if even that goes unanswered, is
// started again on a stream of its own, so that a waiter whose member
// stopped still hears of its turn; each read of a waiter is bounded and
// tried again elsewhere.
//
// A lease that the server revokes before its TTL is a server fault that no
// client can see coming: etcd 3.4 servers revoke the leases they believe
// expired when a stopped raft leader resumes (etcd-io/etcd#15247, fixed by
// #16822; Debian's 3.4.23 predates the fix). The holder's term then ends
// unannounced, before its deadline, and the next request can be granted
// while the holder still runs: the holder learns of it from its watch (its
// keys' deletion) or at the latest from its next renewal ((TTL-Margin)/3
// later, "lease not found"), and leaderrun then stops COMMAND within
// --grace. What still holds: the revoked grant is never taken up by a
// waiter that had not taken it up yet (confirm above); the next holder's
// epoch is larger than the revoked one's (the epoch key is compared and
// written in every grant txn), so a resource that refuses an epoch lower
// than one it has accepted refuses every write of the old holder made
// after the new holder's first; and the overlap is bounded by the renewal
// interval plus --grace. Without epoch checks at the resource, run a
// server that has the fix.
//
// A lost session ends everything of its Locker: every term and every
// waiting request of that Locker ends with elect.ErrSessionLost, and the
// next request starts a new session at the tail of the queue. Without
// quorum (2 of 3 members down) no renewal succeeds: terms end within the
// TTL and nobody is granted until quorum returns.
//
// After a holder's host dies or is cut off, the lock passes when its lease
// expires: TTL after the last renewal. An etcd leader change meanwhile
// restarts that countdown, since the new leader renews every lease in full
// (etcd-io/etcd#9395); the holder's own term still ends on time. Keep the
// TTL short.
//
// A steal's KillAfter revokes the lease of a holder that did not let go:
// its process, perhaps on another host, is not signalled, but all of its
// Locker's terms end. A holder in the same Locker as the stealer is waited
// for. Request.StealStopped has nothing to do: a stopped holder cannot
// renew its lease, so it loses the lock within the TTL anyway.
//
// A holder that dies on a live host would keep its lease, and the name,
// for up to a TTL. Its term can be ended at once by whoever knows it is
// dead: Locker.Lease names a term's lease, for a process of the holder's
// own that outlives it (leaderrun's watchdog revokes it once COMMAND is
// gone), and Locker.EndHolder revokes the lease of a holder given by pid,
// host and epoch (for leaderrun waiting on that host, which sees the
// holder die through a pidfd). Leadership.Deadline tells the holder when
// its term ends unless renewed, and when that moves.
//
// Query's State is "running" for every request whose lease lives: whether
// its process is stopped cannot be seen from another host. Clocks are not
// compared between hosts except through epochs (see above); lease expiry
// runs on the server's monotonic clock.
//
// Keys live under Config.Prefix (default "/leaderrun/v1/"); with etcd's
// authentication, a user needs read and write access to that prefix, and
// revoking a lease needs write access to every key on it.
package etcd
