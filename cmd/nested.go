package cmd

import (
	"os"
	"strconv"

	"github.com/leaderrun/leaderrun/supervise"
)

// nestedIn reports the pid of the leaderrun that already holds name in
// dir for this process: COMMAND (or one of its descendants) calling
// leaderrun again for the same lock. Such a request would queue behind
// its own ancestor, which waits for COMMAND to finish, so it would wait
// for ever. The environment the ancestor gave COMMAND says which lock it
// holds (see runOptions.env); it counts only if that leaderrun is alive
// and really is an ancestor, so a stale or copied environment does not
// refuse a legitimate run. A different name, or another directory, is
// fine.
func nestedIn(dir, name string) (pid int, nested bool) {
	if os.Getenv("LEADERRUN_NAME") != name {
		return 0, false
	}
	pid, err := strconv.Atoi(os.Getenv("LEADERRUN_PID"))
	if err != nil || pid <= 1 || pid == os.Getpid() {
		return 0, false
	}
	theirs, err := os.Stat(os.Getenv("LEADERRUN_DIR"))
	if err != nil {
		return 0, false
	}
	ours, err := os.Stat(dir)
	if err != nil || !os.SameFile(theirs, ours) {
		return 0, false
	}
	return pid, supervise.IsAncestor(pid)
}
