package cmd

import (
	"bufio"
	"context"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/oslock"
)

// The watchdog is what a term leaves behind so that its COMMAND and
// everything COMMAND started go when leaderrun dies, even with no
// successor to fence them: Pdeathsig reaches only COMMAND itself, not its
// process group or what called setsid.
//
// It is leaderrun itself (/proc/self/exe) in a hidden role, in a process
// group of its own (so that Ctrl-C and hang-up do not reach it), with
// /dev/null for stdio and, as descriptor 3, the read end of a pipe whose
// write end only leaderrun holds (every descriptor of leaderrun is
// close-on-exec). It reads lines, one message each:
//
//	command <pid> <start> <pgid>   COMMAND (re)started
//	end                            the term ended cleanly: exit
//
// End of file without "end" means leaderrun is gone: the watchdog fences
// the term as its successor would (cgroup.kill, or the process group and
// the term id) and removes the marker. Unknown messages are skipped, so
// that a later version can add one, such as a deadline after which a
// leaderrun that stopped writing (SIGSTOP) counts as gone.
const (
	watchdogRole   = "LEADERRUN_INTERNAL_ROLE"
	watchdogTerm   = "LEADERRUN_WATCHDOG_TERM"
	watchdogCgroup = "LEADERRUN_WATCHDOG_CGROUP"
	watchdogDir    = "LEADERRUN_WATCHDOG_DIR"
	watchdogName   = "LEADERRUN_WATCHDOG_NAME"
	watchdogSince  = "LEADERRUN_WATCHDOG_SINCE" // leaderrun's start time
)

func init() {
	if os.Getenv(watchdogRole) == "watchdog" {
		os.Exit(runWatchdog())
	}
}

// watchdogPID is the pid of this process's watchdog, which stop and alive
// must not count among COMMAND's descendants.
var watchdogPID atomic.Int64

func isWatchdog(pid int) bool { return pid > 0 && int64(pid) == watchdogPID.Load() }

type watchdog struct {
	pid int
	w   *os.File
}

// startWatchdog starts the term's watchdog, or returns nil if it cannot;
// the term then relies on its successor's fence alone.
func startWatchdog(t *term) *watchdog {
	if strings.Contains(testFence, "nowatchdog") {
		return nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	defer r.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		w.Close()
		return nil
	}
	defer null.Close()
	p, err := os.StartProcess("/proc/self/exe", []string{"leaderrun-watchdog", t.name}, &os.ProcAttr{
		Env: []string{
			watchdogRole + "=watchdog",
			watchdogTerm + "=" + t.rec.id,
			watchdogCgroup + "=" + t.rec.cgroup,
			watchdogDir + "=" + t.d.Path(),
			watchdogName + "=" + t.name,
			watchdogSince + "=" + strconv.FormatUint(t.rec.wstart, 10),
		},
		Dir:   "/", // not to keep the user's working directory busy
		Files: []*os.File{null, null, null, r},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		w.Close()
		return nil
	}
	pid := p.Pid // Release sets p.Pid to -1
	watchdogPID.Store(int64(pid))
	// Never waited for: it outlives leaderrun on purpose. As a child of
	// a subreaper its zombie is collected with COMMAND's orphans.
	p.Release()
	return &watchdog{pid: pid, w: w}
}

// command tells the watchdog which COMMAND to kill.
func (wd *watchdog) command(r *termRecord) {
	if wd != nil {
		wd.w.WriteString(commandMsg(r))
	}
}

// close tells the watchdog that the term ended cleanly.
func (wd *watchdog) close() {
	if wd != nil {
		wd.w.WriteString("end\n")
		wd.w.Close()
	}
}

func runWatchdog() int {
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTTIN, syscall.SIGTTOU)
	r := &termRecord{id: os.Getenv(watchdogTerm), cgroup: os.Getenv(watchdogCgroup)}
	r.wstart, _ = strconv.ParseUint(os.Getenv(watchdogSince), 10, 64)
	if !validTermID(r.id) {
		return 2
	}
	in := bufio.NewReader(os.NewFile(3, "watchdog"))
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			break
		}
		key, val, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		switch key {
		case "end":
			return 0
		case "command":
			var c termRecord
			if parseCommand(val, &c) {
				r.cpid, r.cstart, r.pgid, r.commandStarted = c.cpid, c.cstart, c.pgid, true
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*fenceBudget)
	defer cancel()
	if !fenceTerm(ctx, r) {
		return 1
	}
	// The watchdog is another process: it can only reopen the directory by
	// path. That is safe: it removes one file, its term's marker, named by
	// the term's random 128-bit id, which no directory put at the path
	// since can hold.
	d, err := oslock.OpenDir(os.Getenv(watchdogDir), oslock.DirOptions{GroupShared: true, AllowUnsafeFS: true})
	if err == nil {
		d.Remove(elect.TermMarkerPrefix(os.Getenv(watchdogName)) + r.id)
		d.Close()
	}
	return 0
}
