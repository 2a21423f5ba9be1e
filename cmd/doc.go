// Package cmd is the leaderrun command line: running COMMAND under a lock
// (the default action), and the status, who, publish, subscribe, lockfile
// and completion commands. main.go exits with Main(), which runs
// New().Run and maps its error with ExitCode; the exit codes are
// the constants and the ExitCodes table in exitcode.go, from which --help,
// the manual (internal/man) and docs/command.md's table are made.
//
// # Layout
//
// app.go builds and runs the app; each subcommand has a file of its own
// (status.go, who.go, publish.go, subscribe.go, send.go, lockfile.go,
// completion.go, help.go), listed once, in commands; the default action
// is run.go, with its options (run_options.go), waiting in line
// (run_wait.go), leading (run_lead.go) and its outcome (run_outcome.go),
// and --single-instance (single.go). The argument rewriting
// (protectDashDash, passThrough) and its flag-arity map, takesValueOf, are
// args.go. Who, status, publish, subscribe and lockfile start with
// the one prologue begin (prologue.go); the name rules are elect's
// (ValidateName, NameByte). The backend seam is backend.go, the whole of
// it: New(WithBackend(open, flags...)) builds the command line over
// another election backend than elect.Open's flock directory, with that
// backend's flags (leaderrun-etcd's, in the etcd module), and the
// capabilities a backend may have besides Backend's methods are named
// there (LockDir, Remote, BusBackend, TermEnder, HolderEnder,
// GraceFitter); backendopen.go is how the app opens it. A command
// line can hand itself over to another backend's program, as git does
// with git-NAME: New(WithHandovers(...)) names the flag and the program
// (handover.go). The plain leaderrun's table, the one place that names
// the remote backends' programs (leaderrun-etcd, leaderrun-pg), is
// internal/handovers, which main.go passes to Main.
//
// # Guarantees
//
// What COMMAND's supervision guarantees (COMMAND never outlives the term;
// the fence of a killed leaderrun's leftovers; the watchdog; a leaderrun
// stopped over a lease; the terminal) is stated once, in package
// supervise, which the default action uses in this order: the lock is
// granted, the term begins (supervise.Begin), COMMAND starts in it, is
// stopped, the term ends, and only then is the lock released. The command
// line adds:
//
//   - SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are forwarded to
//     COMMAND's process group. After one of the first four, COMMAND is not
//     restarted, and it gets SIGKILL after --grace if it has not exited (at
//     once on a second one): a stop always stops. While waiting in line,
//     any of them makes leaderrun give up and exit 128+N.
//   - Over a backend whose terms end unless renewed, a leaderrun that
//     finds its deadline passed exits 80 and starts no COMMAND; a term
//     lost before COMMAND started queues again.
//   - A COMMAND that runs leaderrun again for the same name and directory
//     gets exit 64 and one line, not a wait for ever (nested.go).
//   - The exit status is COMMAND's, 128+N when it died of signal N, or one
//     of the documented codes.
//
// # Not guaranteed
//
//   - When stdout is not the terminal and other processes share
//     leaderrun's group (a pipeline, leaderrun -- cmd | less, whose other
//     commands keep the terminal), COMMAND's process group is not the
//     terminal's foreground group: a COMMAND that reads the terminal gets
//     SIGTTIN. The rest is in package supervise.
package cmd
