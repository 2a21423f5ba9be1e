// Package supervise runs COMMAND for a process that holds a lock, the
// supervisor (the leaderrun command, package cmd), so that COMMAND runs
// only while its supervisor's term lasts: Begin a term once the lock is
// granted, Start COMMAND in it, Stop COMMAND, End the term, and only then
// release the lock. It is the one place where the guarantees about
// COMMAND are stated; the command's doc and docs/guarantees.md link here.
//
// # Guarantees
//
// On Linux, for a supervisor that keeps to that order:
//
//   - COMMAND never outlives the term. Stop ends COMMAND's process group
//     and every other process of COMMAND's: where COMMAND runs in a cgroup
//     of its own (below), every process in that cgroup; elsewhere every
//     process that left the group but is still the supervisor's
//     descendant (the supervisor is a child subreaper, so orphans of
//     COMMAND stay its descendants): SIGTERM, SIGKILL after the grace, at
//     once on a second terminating signal; it returns once all are gone
//     (a zombie counts as gone), or after a bounded wait for processes
//     that ignore even SIGKILL. COMMAND does not inherit the lock: lock
//     descriptors are close-on-exec, so a stray background process can
//     never keep the lock after its leader is gone.
//   - The supervisor killed with SIGKILL (or by the OOM killer): its
//     COMMAND is gone before the next COMMAND starts, on this host. The
//     kernel kills COMMAND when the thread that started it dies
//     (Pdeathsig; the start and the wait run on one goroutine locked to
//     its thread, golang/go#27505). Pdeathsig reaches the direct child
//     only, and the kernel drops the dead supervisor's flock before it
//     delivers it, so each term also writes a marker, <dir>/<name>.cmd.<id>
//     (the term's random 128-bit id, also COMMAND's LEADERRUN_TERM;
//     COMMAND's pid, start time and process group; the term's cgroup),
//     removed by End once COMMAND and all it started are stopped. This is
//     the fence: Begin, in the next holder, finds the marker of a term
//     that did not end so, kills what is left and waits until it is gone.
//     Where the supervisor may manage cgroups below its own cgroup v2
//     (writable, and the root of a cgroup namespace, or delegated),
//     COMMAND runs in a cgroup of its own and the fence is one write to
//     its cgroup.kill and a wait on cgroup.events, whatever the number of
//     processes, also for what called setsid or forks meanwhile.
//     Elsewhere COMMAND (recognised by its start time, through a pidfd)
//     and its process group are killed, and /proc is scanned, in rounds
//     until none is left, for processes whose environment carries the
//     term id. A term is never recognised by the directory's name;
//     exclusive holders fence every other term, a shared holder spares
//     the terms of shared holders that still hold the lock, and pids of
//     another pid namespace are never signalled.
//   - The watchdog: with no next holder, nothing of a dead supervisor runs
//     on. An exclusive term has a watchdog from before COMMAND starts (a
//     shared one once COMMAND has run for 20 ms), the
//     supervisor's own binary re-executed in a process group of its own,
//     reading a socket only the supervisor writes (and keeping a copy of
//     the lock's claim, elect.Leadership.Claim, so that a newcomer in a
//     lock directory made anew at the path waits for it). A term prepared
//     while waiting (Prepare) has its watchdog started then, idle until
//     the term begins it and hands it the claim, so that the grant starts
//     no process but COMMAND. When the supervisor dies without ending its
//     term, the socket reaches end of file and the watchdog fences the
//     term as a successor would, removes its marker and nudges the line
//     (elect.Nudge).
//   - The supervisor stopped (SIGSTOP, Ctrl-Z, starved) over a backend
//     whose terms end unless renewed (a Leadership with a Deadline: etcd,
//     PostgreSQL): COMMAND does not run past the term. Expire starts the
//     watchdog before COMMAND and tells it every new deadline; if one
//     passes unrenewed, it sends COMMAND's group SIGTERM, fences the term
//     after the grace, and ends the term in the backend (RunWatchdog's end
//     function, from the token the backend gave), so that the next holder,
//     on any host, need not wait for the lease to expire; it does the same
//     at once when the supervisor dies. A supervisor stopped over a term
//     that lasts until released (flock) keeps the lock: see elect.
//   - In a terminal, COMMAND's group is the terminal's foreground group
//     while it runs (when the supervisor is in the foreground, whatever
//     its stdin), and the supervisor's gets the terminal back afterwards;
//     Ctrl-Z stops COMMAND and then the supervisor (Suspend), and a
//     hang-up is reported by WatchHangup.
//
// # Not guaranteed
//
//   - A process that leaves COMMAND's process group and clears its
//     environment (env -i) is still stopped by Stop (it stays a
//     descendant, and in COMMAND's cgroup), but after its supervisor is
//     killed with SIGKILL it escapes the fence unless COMMAND runs in a
//     cgroup of its own; so does, in any case, one that both moved itself
//     to another cgroup (systemd-run --scope) and left the group, and
//     where COMMAND has a cgroup such a process is not stopped by Stop
//     either: it is not COMMAND's any more. It never holds the lock,
//     so it cannot keep the next leader out. Without a writable cgroup
//     the fence scans /proc after every crash, in time linear in the
//     number of processes.
//   - A shared holder's supervisor killed within 20 ms of starting
//     COMMAND has no watchdog yet: its leftovers go when the next holder
//     fences them. (An exclusive term's watchdog starts before COMMAND:
//     it keeps the name's claim, without which a newcomer in a lock
//     directory made anew at the path could lead beside a leftover that
//     no successor fences.)
//   - Outside Linux there are no Pdeathsig, /proc, pidfds, cgroups or
//     subreapers: no term is marked, a COMMAND whose supervisor is killed
//     with SIGKILL keeps running while the next leader starts, and COMMAND
//     runs in a background process group without the terminal. Stopping
//     the supervisor with any catchable signal stops COMMAND first
//     everywhere. Without POSIX signals (Windows) only COMMAND itself is
//     signalled, and it is killed, not asked, when it must stop.
//
// # Platforms
//
// One split, as in Go's lockedfile: name_linux.go is Linux, name_unix.go
// the other Unix systems, name_other.go the rest; a file without a suffix
// is for every platform, unless a build line says which of these it
// serves (group.go: Unix, Linux included; nolinux.go: what Linux alone
// has, as stubs for the others). Every exported name and its doc is in a
// file without a suffix, so that go doc reads the same on every GOOS.
package supervise
