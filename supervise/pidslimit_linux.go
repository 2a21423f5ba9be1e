package supervise

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/oslock"
)

// tasksNeeded is how many tasks (threads and processes) a run of
// leaderrun may take: its own threads at their peak (the Go runtime's,
// the one that waits for COMMAND, the terminal's watch, the bus),
// COMMAND's first process and the term's watchdog, started while
// waiting. Measured: 7 to 9 threads in `leaderrun -- sleep 1`, with -v,
// --fanout, in line, and 5 tasks for the watchdog.
const tasksNeeded = 15

// pidsLimit is the error for a pids cgroup (systemd's TasksMax=, a
// container's pids limit) too close to its limit for leaderrun to run:
// where the Go runtime cannot create a thread it needs it aborts with a
// dump of every goroutine (exit 2), which no code of leaderrun can
// catch. So the limit is checked first, and the same one line and 71
// that a fork of COMMAND refused with EAGAIN gets are given at once
// (cmd: "leaderrun: " and the error, exit 71). Nil when there is room, or
// no limit can be read; always nil but on Linux.
func pidsLimit() error {
	threads := ownThreads()
	for _, cg := range pidsCgroups() {
		max, err := readInt(filepath.Join(cg, "pids.max"))
		if err != nil {
			continue // "max": no limit at this level
		}
		cur, err := readInt(filepath.Join(cg, "pids.current"))
		if err != nil {
			continue
		}
		if room := max - cur; room < tasksNeeded-threads {
			return fmt.Errorf("the pids cgroup %s is at its limit (%d of pids.max %d tasks in use; leaderrun needs about %d and COMMAND its own); raise the limit (TasksMax= of the unit, the container's pids limit) or end some processes, and try again",
				strings.TrimPrefix(cg, "/sys/fs/cgroup"), cur, max, tasksNeeded)
		}
	}
	return nil
}

// pidsCgroups are the directories of this process's pids cgroup and of
// each of its ancestors (each level's limit applies), under the cgroup v1
// pids hierarchy or the unified (v2) one.
func pidsCgroups() []string {
	b, err := readProc("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	var dirs []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// ID:CONTROLLERS:PATH
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var root string
		switch {
		case parts[0] == "0" && parts[1] == "":
			root = "/sys/fs/cgroup"
			if unix.Access("/sys/fs/cgroup/unified/cgroup.procs", unix.F_OK) == nil {
				root = "/sys/fs/cgroup/unified" // hybrid: v2 beside v1
			}
		case strings.Contains(","+parts[1]+",", ",pids,"):
			root = "/sys/fs/cgroup/pids"
		default:
			continue
		}
		for p := filepath.Clean("/" + parts[2]); ; p = filepath.Dir(p) {
			dirs = append(dirs, filepath.Join(root, p))
			if p == "/" {
				break
			}
		}
	}
	return dirs
}

// ownThreads is this process's number of threads, or 1: num_threads of
// /proc/self/stat, a line the kernel makes much faster than
// /proc/self/status (every start reads it).
func ownThreads() int {
	if n, ok := oslock.StatNumber(os.Getpid(), 20); ok && n > 0 {
		return int(n)
	}
	return 1
}

func readInt(path string) (int, error) {
	b, err := readProc(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// readProc reads a small file of /proc or /sys with plain system calls
// (readSmall): this runs before startPoller, and an os.File would make
// the Go runtime create its poller, which it cannot do without a fatal
// error when descriptors are short (see startPoller).
func readProc(path string) ([]byte, error) { return readSmall(path, make([]byte, 16<<10)) }
