package cmd

// FlockRow is one habit of flock(1) and what it becomes with leaderrun.
type FlockRow struct{ Flock, Leaderrun string }

// FlockMigration is the one table of differences from flock(1): the
// manual's FLOCK(1) MIGRATION section and docs/command.md's table (between its
// flock-migration markers) are made from it by go generate. A conflict
// exits 75, not flock's 1, on purpose: 1 is the commonest failure status
// of a COMMAND, and a script that tests for "skipped" must not take a
// failed run for one; -E 1 gives flock's code back.
var FlockMigration = []FlockRow{
	{"flock FILE COMMAND", "leaderrun --name NAME -- COMMAND: a name, not a file; the lock file is DIR/NAME.lock (leaderrun lockfile NAME prints it), so flock(1) on that path and leaderrun exclude each other"},
	{"flock DIR COMMAND, flock FD (exec 9>FILE; flock 9)", "no equivalent: leaderrun locks only its own files; wrap the script instead ([ \"$LEADERRUN_NAME\" = job ] || exec leaderrun --name job -- \"$0\" \"$@\")"},
	{"-c 'SHELL COMMAND'", "-- sh -c 'SHELL COMMAND'"},
	{"-x, -e, --exclusive (the default)", "the same: -x, -e, --exclusive, the default; not together with -s"},
	{"-s, --shared", "the same"},
	{"-n, --nb, --nonblock", "the same"},
	{"-w, --timeout SECONDS", "the same (-w, --wait, --timeout); also with a unit: 1500ms, 2m"},
	{"-E, --conflict-exit-code N", "the same"},
	{"exit 1 when -n or -w finds the lock taken", "exit 75 (EX_TEMPFAIL), which no COMMAND status is mistaken for as easily as 1; give -E 1 to keep flock(1)'s 1"},
	{"-o, --close", "always: COMMAND never holds the lock, a background process it leaves cannot keep it"},
	{"-u, --unlock", "no equivalent: the lock is released when leaderrun exits, after COMMAND's process group is gone"},
	{"-F, --no-fork", "no equivalent: leaderrun stays COMMAND's parent, to stop it when the lock is lost or stolen"},
	{"--verbose", "-v, --verbose: also the place in line and who leads"},
	{"waiters take the lock in no order", "first come, first served (-s after a waiting exclusive request waits for it)"},
	{"COMMAND shares flock's process group; signals are not forwarded", "COMMAND runs in its own process group and gets the terminal; SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 are forwarded; all of the group is stopped (SIGTERM, SIGKILL after --grace) when COMMAND exits"},
	{"exit 73 (read-only or full), 71 (out of descriptors or memory), 66 (any other failure to open the file)", "73 and 71 the same; instead of 66: 77 when the lock directory is missing, inaccessible or insecure, 65 when a file in it is not one leaderrun made (see EXIT STATUS)"},
	{"COMMAND's status, 128+N when it died of signal N", "the same"},
}
