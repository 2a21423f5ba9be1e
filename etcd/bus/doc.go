// Package bus is the bus of a name over etcd, as package
// github.com/leaderrun/leaderrun/bus is the bus of a name on one host:
// that package's contract (who leads, ordered fan-out within a term,
// requests to the leader) kept in etcd, so that its members may be on any
// host. It serves the names of an etcd.Locker. The exclusive holder
// serves it with Listen and Server.Serve; members call Dial and read
// Client.Events. Events, errors and order are those of package bus (see
// its Guarantees); what differs is said here.
//
// Keys, under the name's base P/N/ (see package etcd's keys.go):
//
//	P/N/~bus/serve/<E>     who serves term E: a copy of the grant marker's
//	                       fields, its key and creation revision, whether
//	                       requests are handled and the payload limit; on
//	                       the holder's lease, made by Listen with the
//	                       channel
//	P/N/~bus/msg/<E>       the term's channel, on the holder's lease:
//	                       version 1 is empty, the n-th message is version
//	                       n+1, so seq = Version-1 and order = ModRevision
//	P/N/~bus/req/<E>/<id>  a member's request, on the member's lease; the
//	                       leader puts its reply into the same key
//	                       (version 2)
//
// "~" sorts after every other key of the name, so a watcher of the lock
// alone can leave the bus's traffic out with the range [P/N/, P/N/~).
//
// Every write to a term's keys is one txn guarded by the term itself: the
// grant marker's creation revision (a release, an expiry or a revoke
// deletes it), the serve key's creation revision (the server stopped) and
// no steal key created after the grant (the holder has been deposed). A
// message or request addressed to a term that has ended therefore never
// lands, in that term or a later one. A member follows the name with one
// Watch on P/N/ from the revision it read, so that leader changes,
// messages and replies reach it in etcd's one order: a term's EventLost
// comes after all of its messages. When that watch fails it resumes from
// the last revision it saw, and only when etcd has compacted that history
// does it read the present state again and report what it lost as Gap.
//
// Nothing outlives a lease: a server that stops deletes its serve key,
// channel and pending requests in one txn; a member deletes its request
// once answered (retrying while its session lives); and a holder that
// dies takes its keys with its lease.
//
// Cost: every message and every request is a raft commit and is sent to
// every watcher of P/N/: the members, and for now also the holder's term
// monitor and the name's waiters, which watch all of P/N/ although the
// range above would do. The bus is for control traffic, not data streams. A
// publish costs one guarded txn, about 1.5 times a plain Put seen by a
// Watch (0.35-0.4ms on a one-member etcd on loopback, more on a
// disk-backed cluster; BenchmarkBus measures both). Every message also
// stays in etcd's history until the cluster is compacted: run etcd with
// --auto-compaction-retention, or a chatty --fanout fills its database to
// the quota. The server commits one message per round trip, in order;
// what COMMAND prints faster waits in a bounded queue and, when the queue
// is full, is dropped (ErrFull) and flagged to members as a gap.
//
// Where it differs from the Unix-socket bus:
//
//   - Server.Publish returns seq 0: members publish into the same
//     channel, so a message's place is known only once etcd commits it
//     (Server.PublishWait returns it).
//   - A member publishes straight into etcd, so fan-out goes on while the
//     leader's process is stopped; a stopped leader's lease expires
//     within the TTL, and then its members see EventLost. Requests wait
//     for the handler.
//   - Nobody is cut off as a slow consumer: a member that leaves more
//     than DialOptions.EventBuffer messages unread loses the excess, and the
//     next message it delivers has Gap set. Gap also marks a message
//     after a compaction or the leader's full queue.
//   - A Publish or Request whose term ended before etcd committed it was
//     provably not delivered; it goes on with the next leader (or fails
//     with lrbus.ErrNoLeader) rather than with lrbus.ErrLeaderChanged, which
//     is kept for an outcome that is unknown (etcd unreachable) and for a
//     term that ends after a request was sent.
//   - Access is etcd's: whoever may write the prefix may publish and
//     request, and lrbus.Request's PID and UID are what the member states,
//     not what a kernel reports.
package bus
