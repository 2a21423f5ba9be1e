// Package cmd is the leaderrun command line: running COMMAND under a lock
// (the default action), and the status, who, publish, subscribe, lockfile
// and completion commands. main.go exits with Main(), which runs
// New().Run and maps its error with ExitCode; the exit codes are
// the constants and the ExitCodes table in exitcode.go, from which --help,
// the manual (internal/man) and docs/command.md's table are made.
//
// # Layout
//
// The subcommands are listed once, in commands (app.go); the flag-arity
// map that the argument rewriting (protectDashDash, passThrough) needs is
// takesValueOf; who, status, publish, subscribe and lockfile start with
// the one prologue begin (prologue.go); the name rules are elect's
// (ValidateName, NameByte). The backend seam is backend.go, the whole of
// it: New(WithBackend(open, flags...)) builds the command line over
// another election backend than elect.Open's flock directory, with that
// backend's flags (leaderrun-etcd's, in the etcd module), and the
// capabilities a backend may have besides Backend's methods are named
// there (LockDir, Remote, BusBackend, TermEnder, HolderEnder,
// GraceFitter). The plain leaderrun hands a command line with
// --etcd-endpoints over to leaderrun-etcd (handover.go).
//
// # Guarantees
//
//   - COMMAND starts only after this instance holds the lock, and the lock
//     is released only after COMMAND's whole process group, and every
//     process that left the group but is still leaderrun's descendant, is
//     gone: SIGTERM, then SIGKILL after --grace.
//   - COMMAND does not inherit the lock. Lock descriptors are O_CLOEXEC, so
//     a stray background process can never keep the lock after its leader
//     is gone; flock(1) passes its descriptor on and has exactly that
//     failure. The price is that leaderrun itself must make COMMAND die
//     with it, which it does three ways:
//     1. Pdeathsig (Linux): the kernel sends SIGKILL to COMMAND when the
//     thread that started it dies; the start and the wait run on one
//     goroutine locked to its thread (golang/go#27505).
//     2. leaderrun is a child subreaper (Linux), so orphans of COMMAND stay
//     its descendants and are found and stopped.
//     3. The orphan fence (Linux): the kernel drops a dead process's flock
//     before it delivers Pdeathsig, and Pdeathsig reaches only the direct
//     child. So a new holder, before it starts COMMAND, kills what a term
//     that did not end cleanly left running, and waits until it is gone
//     (term.go, fence_linux.go). This is what makes "leaderrun killed with
//     SIGKILL: its COMMAND is gone before the next one starts" hold.
//     4. The watchdog (Linux): with no next holder, what leaderrun leaves
//     behind once COMMAND has run for 20 ms fences the term when
//     leaderrun dies (watchdog_linux.go).
//   - Over a backend whose terms end unless renewed (etcd: a Leadership
//     with a Deadline), COMMAND never runs past the term: the watchdog
//     starts before COMMAND and is told every new deadline; if one passes
//     unrenewed (leaderrun stopped or starved), it sends COMMAND's group
//     SIGTERM, fences the term after --grace, and ends the term in the
//     backend (TermEnder: etcd revokes the lease). When leaderrun dies it
//     does the same at once, so the next holder need not wait for the
//     lease to expire. leaderrun that finds its deadline passed exits 80
//     and starts no COMMAND.
//   - SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are forwarded to
//     COMMAND's process group. After one of the first four, COMMAND is not
//     restarted, and it gets SIGKILL after --grace if it has not exited (at
//     once on a second one): a stop always stops. While waiting in line,
//     any of them makes leaderrun give up and exit 128+N.
//   - In a terminal (Linux; leaderrun in its controlling terminal's
//     foreground group, whatever its stdin: seq 200 | leaderrun -- less),
//     COMMAND's group is the foreground group while it runs, and
//     leaderrun's gets the terminal back afterwards (tty_linux.go).
//     Ctrl-C reaches COMMAND, Ctrl-Z stops COMMAND and then leaderrun, and a
//     hang-up ends the term.
//   - A COMMAND that runs leaderrun again for the same name and directory
//     gets exit 64 and one line, not a wait for ever (nested.go).
//   - The exit status is COMMAND's, 128+N when it died of signal N, or one
//     of the documented codes.
//
// # Not guaranteed
//
//   - A process that leaves COMMAND's process group and clears its
//     environment (env -i) is still stopped when leaderrun exits normally
//     (it stays leaderrun's descendant), but after leaderrun is killed
//     with SIGKILL it escapes the fence, unless COMMAND runs in a cgroup
//     of its own. It never holds the lock, so it cannot keep the next
//     leader out.
//   - On platforms without Pdeathsig, /proc and subreapers (the BSDs,
//     macOS), a COMMAND whose leaderrun is killed with SIGKILL keeps
//     running while the next leader starts. Stopping leaderrun with any
//     catchable signal stops COMMAND first everywhere.
//   - Outside Linux, or when stdout is not the terminal and other
//     processes share leaderrun's group (a pipeline, leaderrun -- cmd |
//     less, whose other commands keep the terminal), COMMAND's process
//     group is not the terminal's foreground group: a COMMAND that reads
//     the terminal gets SIGTTIN.
//
// # Failure modes
//
// Every term, exclusive or shared, has a marker <dir>/<name>.cmd.<id>
// while COMMAND may run, removed once COMMAND and all it started are
// stopped; a killed leaderrun leaves it behind for the next holder to find.
// With a cgroup of the term (where leaderrun's own cgroup v2 is writable),
// the fence is one write to cgroup.kill and a wait on cgroup.events,
// whatever the number of processes. Without one, it kills COMMAND and its
// process group and reads /proc/PID/environ of every process for the term
// id (LEADERRUN_TERM), waiting for what it kills on pidfds. An exclusive
// holder fences every other term's marker; a shared holder spares those
// of shared holders that still hold the lock.
package cmd
