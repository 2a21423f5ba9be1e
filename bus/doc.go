// Package bus lets the leader of a name share its work with everyone else
// over a Unix socket in the lock directory: it says who leads, fans
// messages out to every member, and answers members' requests. It is the
// BroadcastChannel half of leaderrun: the leader does the expensive work
// once and the others listen instead of doing it again.
//
// The leader calls Serve (or Listen and Server.Serve) with its
// *elect.Leadership; members call Dial with the same directory and name,
// then read Events, Publish and Request.
//
// # Guarantees
//
//   - Only the holder of the exclusive lock serves <dir>/<name>.sock, mode
//     0600: Listen takes only an exclusive leadership of the flock backend
//     (elect.Locker), and serves in the very directory it was granted in
//     (Leadership.OpenDir), not in whatever is at the path by then. It replaces a stale socket with an atomic rename, which is safe
//     only because it holds the lock; nobody else removes the socket, and
//     a leader that has lost its lock leaves it for the next one.
//   - A member learns the leader (pid, epoch, since, mode) as the first
//     event of every connection (EventLeader), and loses it with
//     EventLost and a reason. It reconnects by itself when the next
//     leader's socket appears, woken by a directory event (on Linux
//     through the process's one inotify instance, shared with every other
//     watch of the process; kqueue elsewhere), not by polling.
//   - Within one term (epoch), every message gets the next sequence number
//     from 1, and every member receives the term's messages in that one
//     order, its own publications included, without holes for as long as
//     its connection lasts. A member that reconnects is told, with
//     EventLeader's Gap, whether it may have missed messages.
//   - Publish returns once the leader has sequenced the message; Request
//     returns the handler's reply. Neither drops silently: with no leader
//     they fail with ErrNoLeader (or wait, with WaitForLeader); if the
//     connection ends after sending they fail with ErrLeaderChanged.
//   - The leader never blocks on a member. Each connection has a bounded
//     queue (QueueLength frames, 64 MiB at most); a member whose queue
//     overflows is cut off with ErrSlowConsumer as its reason and
//     reconnects, seeing the gap, while everyone else goes on at full
//     speed. On the member's side, an application that leaves more than
//     EventBuffer events unread is cut off the same way by its own
//     client.
//   - Payloads are at most MaxMessageSize bytes (default 1 MiB); larger
//     ones fail with ErrTooLarge before anything is sent.
//   - The leader admits only peers of its own effective uid, as reported by
//     the kernel, and a member talks only to a leader of its own uid. A
//     malformed, truncated or oversized frame ends that one connection,
//     with the reason, and nothing else.
//
// # Not guaranteed
//
//   - No order between terms beyond "a higher epoch comes later", and no
//     replay: messages published while a member was disconnected are not
//     kept for it. The bus announces what the leader knows; whatever must
//     survive a leader belongs in the leader's own store, fenced by epoch.
//   - A Publish or Request answered by ErrLeaderChanged, or abandoned by
//     its ctx, may or may not have taken effect.
//   - A leader that is stopped (SIGSTOP, a debugger) still holds its lock
//     and socket: members stay connected and hear nothing, and a member
//     that cannot complete the handshake retries with a pause growing to
//     five seconds.
//
// # Failure modes
//
// A member cut off as a slow consumer gets the reason if it reads again
// within about two seconds; after that the leader closes the connection
// and the member sees only that it was lost (ErrLeaderGone). A client that
// cannot watch the directory (no inotify instances left) falls back to
// retrying with a pause of up to five seconds.
//
// # Platform notes
//
// Peer credentials come from SO_PEERCRED on Linux and LOCAL_PEERCRED on
// darwin and FreeBSD (with LOCAL_PEERPID for the pid on darwin; on
// FreeBSD the pid is what the member states). Elsewhere the leader cannot
// ask the kernel, and the socket's mode 0600 in a directory private to
// the user is the only protection. Socket paths are bound through
// /proc/self/fd on Linux, so a deep lock directory does not hit the
// 108-byte sun_path limit. On unix the sockets are the system's own, on
// non-blocking descriptors served by the runtime's poller, so that package
// net and its cgo resolver are not linked into a program for them; on
// other systems they are package net's.
package bus
