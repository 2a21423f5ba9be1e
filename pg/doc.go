// Package pg is leaderrun's election over PostgreSQL, for contenders on
// many hosts that share a database: the contract of package elect
// (exclusive and shared modes, strict FIFO, steals, fencing epochs, a
// queue that can be listed) kept in a few tables instead of flock(2). A
// [Locker] satisfies [elect.Backend], so an [elect.Elector] runs on it
// unchanged, and it passes elect/electtest.
//
// It is a module of its own (github.com/leaderrun/leaderrun/pg), so that
// the leaderrun binary and the elect package never link the driver
// (github.com/jackc/pgx/v5).
//
// # Why not an advisory lock
//
// "Run this on one server only" is often a session advisory lock
// (pg_try_advisory_lock). The server frees such a lock the moment it ends
// the holder's session (pg_terminate_backend, idle_session_timeout, a
// restart, a failover, a half-open socket it gives up on), before the
// holder can know, and the next node takes it while the first still
// runs: two leaders. Here a session is a lease instead, and the advisory
// lock is only a wake-up.
//
// # Design
//
// Each Locker has one session: a row of the sessions table whose
// expires_at the server sets, by its own clock, to clock_timestamp() +
// TTL at each renewal, and one connection, which made the row, holds the
// session's advisory lock for its life, and runs every statement of the
// session. The Locker's loop renews the lease three times per TTL less
// Config.Margin. A request is a row of the requests table; its ticket (a
// bigserial) orders the queue, steals first. Every grant, release and
// removal of a name is one call of a plpgsql function that first locks the
// name's row of the epochs table, so grants of a name are serialized by
// the server; a grant draws the epoch in the same transaction. A waiter
// LISTENs on its Locker's channel and sleeps until a NOTIFY addressed to
// it, until the connection of the request it waits behind ends (it sleeps
// on that session's advisory lock, on a connection of its own), or, once
// that connection is gone, until that request's lease expires by the
// server's clock (one timer). Nothing polls. Whoever removes a request (a
// release, a watchdog's or a steal's end of a session) moves on only the
// requests that may move now, a bounded number whatever the length of the
// queue: in the same transaction it grants each one that nothing blocks
// any more and whose session's lease and connection live, and tells it
// the grant (epoch and time) with the notification, so its owner holds
// without another round trip; any other it tells to look again
// (evaluate).
//
// # Bus
//
// A name's bus (who leads, ordered fan-out within a term, members'
// publications sequenced by the leader) runs over LISTEN/NOTIFY on one
// channel per name: [Locker.ListenBus] serves it, [Locker.DialBus] joins
// it. Every message is notified with its term's epoch and sequence in a
// statement that notifies only while the term's request row exists, so
// nothing published to a term that has ended lands in it; one connection
// sends all of a term's messages, so they arrive in order, and a term's
// EventLost comes after them. There is no history: a member hears what is
// published after it joined (Gap on the first message of a term it joined
// late). Data is at most MaxBusMessage bytes (a NOTIFY payload is 8000).
//
// # Guarantees
//
//   - At most one exclusive holder per name and schema, or any number of
//     shared holders and no exclusive one, among holders whose terms have
//     not ended. A request is granted only when every conflicting request
//     ahead of it is gone or its lease has expired by the server's clock.
//   - A holder learns it lost before anyone else can be granted: its term
//     ends by its own monotonic clock at the send time of the last
//     acknowledged renewal plus the TTL less the margin. The server set
//     the expiry after it received that renewal, so the term ends margin
//     before the server can see the lease expired, whatever the network
//     does, and also when the server ends the session's connection or
//     restarts: that frees the advisory lock but not the lease.
//   - A waiting request of a session whose connection is gone is never
//     granted (its own connection grants it, or a transaction that sees
//     that connection's advisory lock still held), so the requests behind
//     it pass it at once. A granted one keeps the name until its lease
//     expires or its session is ended (EndSession, by leaderrun's
//     watchdog once COMMAND is gone). A waiting process that dies in the
//     instant before the name is let go, before the server has seen its
//     connection close, may be handed the name, which then passes when
//     its lease expires, within a TTL, as for a waiter whose host died.
//   - A grant told with a notification is taken only while the session's
//     own deadline has not passed, the same rule as any other term: the
//     server made it while the lease lived.
//   - First come, first served by ticket, except that a steal goes ahead
//     of everyone; a shared request waits for a queued exclusive one ahead
//     of it (writers do not starve); consecutive shared requests are
//     granted together.
//   - Epochs strictly grow per name and schema, across crashes, steals and
//     restarts: each grant writes max(last+1, the server's clock in
//     microseconds) to the name's row in the grant transaction, the flock
//     backend's scale.
//   - Renewals and grants are committed with synchronous_commit=on
//     whatever the server's default (a grant made by a watchdog's end of
//     a session too), so a crash of the server does not lose a renewal
//     or a grant its holder was told of.
//   - A cancelled or timed-out request removes its row; if the server
//     cannot be reached to do so, the Locker gives up its session, whose
//     waiting rows everyone then passes.
//   - Query reads one statement and writes nothing.
//
// # Failure modes and non-guarantees
//
// A paused process is the danger of every multi-host lock. A holder that
// is stopped (SIGSTOP, a debugger, a GC pause, a frozen VM) past its
// deadline cannot tell anyone: its lease expires on the server, the next
// in line is granted, and when the paused process runs again it may do a
// write or two before its own timer ends its term. Only the resource can
// refuse those: pass Leadership.Epoch with every write and have the
// resource refuse an epoch lower than one it has accepted.
//
// The lease runs on the server's wall clock (PostgreSQL has no monotonic
// clock in SQL). A step of that clock forward by more than the margin
// (an NTP step, a VM restored) expires leases early and can give two
// holders; slewing, as chrony and ntpd do by default after boot, is
// harmless. Clock rates are assumed to agree within the margin per TTL.
//
// Replication: a Locker must talk to the primary. After an asynchronous
// standby is promoted, commits the old primary acknowledged may be lost:
// a grant, or the renewals that keep a lease, so a new holder can be
// granted while the old one's term has not ended (for up to a TTL). The
// epoch fence still orders them: the new grant's epoch is at least the
// new primary's clock in microseconds, above the lost one as long as that
// clock is not behind the old primary's at the lost grant. Mutual
// exclusion across a failover needs synchronous replication
// (synchronous_standby_names with synchronous_commit on or remote_apply),
// which the session's synchronous_commit=on then waits for.
//
// A transaction-mode pooler (PgBouncer's pool_mode=transaction) cannot
// carry a session: its advisory lock, its LISTEN and its connection's
// life are what the design rests on. Connect to the server, or to a
// session-mode pool. The server enforces it: only the backend that opened
// a session may queue, evaluate, release or renew for it (ErrPooler
// otherwise), so a pooler that moves a session's statements is refused,
// not obeyed. (A grant handed on by the transaction that lets a name go
// is not the session's own statement; it is made only while the
// session's connection holds its advisory lock.)
//
// After a holder's host dies or is cut off, the name passes when its
// lease expires, TTL after the last renewal: the server ends the idle
// connection (idle_session_timeout is set to the TTL), which wakes the
// waiter behind it, and the waiter then sleeps until the expiry. A holder
// that dies on a live host is ended at once by leaderrun's watchdog
// (EndSession); Session names a term's session for it, and
// PrepareEndSession opens ahead, while the term runs, the connection that
// ends it in one round trip (falling back to a fresh one if the server
// ended that connection meanwhile). A steal's
// KillAfter ends the sessions of holders that did not let go: their
// processes, perhaps on other hosts, are not signalled, but all of their
// Lockers' terms end. Request.StealStopped has nothing to do: a stopped
// holder cannot renew its lease.
//
// Query's State is "running" for every request whose lease lives:
// whether its process is stopped cannot be seen from another host.
//
// # Privileges
//
// The first Locker to use a schema creates it (CREATE on the database);
// every user of it needs USAGE on the schema, SELECT, INSERT, UPDATE and
// DELETE on its tables, USAGE on its sequences and EXECUTE on its
// functions. PostgreSQL 14 or later (idle_session_timeout).
package pg
