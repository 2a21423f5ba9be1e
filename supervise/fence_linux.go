package supervise

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/oslock"
)

const fenceSupported = true

// fenceTerm kills what the dead term r left running because its leaderrun
// died without stopping it (SIGKILL, OOM killer). The kernel drops a dead
// process's flock before it delivers Pdeathsig to its child, and Pdeathsig
// reaches only the direct child, so without this a new COMMAND could start
// while the old one, or its grandchildren, still run.
//
// With a cgroup of its own, the term is one cgroup.kill and a wait for
// cgroup.events to say "populated 0": O(1), and it catches processes that
// left the process group (setsid) or keep forking. Without one, COMMAND
// (checked by its start time, through a pidfd) and its process group are
// killed at once, and /proc is scanned for processes carrying the term id
// (fenceOrphans), which also finds those that left the group.
//
// It reports whether the term is over: nothing of it is left.
func fenceTerm(ctx context.Context, r *termRecord) bool {
	inCgroup := r.cgroup != "" && validCgroup(r.cgroup, r.id) && cgroupKill(r.cgroup)
	wait := killCommand(r)
	gone := true
	if inCgroup {
		gone = cgroupRemove(ctx, r.cgroup)
	}
	if !inCgroup || !gone {
		// COMMAND is among what the scan waits for, unless it left
		// the term's environment behind (exec with another one).
		gone = fenceOrphans(ctx, r) && gone
	}
	if wait != nil {
		if oslock.WaitPidfd(ctx, wait) != nil {
			gone = false
		}
		wait.Close()
	}
	return gone
}

// killCommand sends SIGKILL to the term's COMMAND and its process group,
// and returns a pidfd of COMMAND to wait on, or nil if it is gone.
//
// A process group is named by its leader's pid, and that number is not
// reused while any member lives. So the group is killed only when its
// leader is the recorded COMMAND (same start time: a pidfd opened first
// pins the process, so the check cannot be raced by a new one), or when no
// process has that pid at all (a leaderless group: only the term's
// processes can be in it, or nobody is). A pid that now names another
// process means the old group is long empty: nothing is sent.
func killCommand(r *termRecord) *os.File {
	if !r.commandStarted || foreignPids(r) {
		return nil
	}
	pidfd, err := oslock.OpenPidfd(r.cpid)
	if err != nil {
		if err == unix.ESRCH {
			killGroup(r.pgid)
		}
		return nil
	}
	if start, ok := procStart(r.cpid); !ok || start != r.cstart {
		pidfd.Close()
		if !ok {
			killGroup(r.pgid)
		}
		return nil
	}
	if rc, err := pidfd.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { _ = unix.PidfdSendSignal(int(fd), unix.SIGKILL, nil, 0) })
	}
	if r.pgid == r.cpid {
		killGroup(r.pgid)
	}
	return pidfd
}

func killGroup(pgid int) {
	if pgid > 1 {
		_ = unix.Kill(-pgid, unix.SIGKILL)
	}
}

// wrapperAlive reports whether the leaderrun that wrote r still runs: its
// pid names a process that started when the record says and is not gone.
func wrapperAlive(r *termRecord) bool {
	start, ok := procStart(r.wpid)
	return ok && start == r.wstart && oslock.StateOf(r.wpid) != oslock.ProcGone
}

// lockHolders returns the pids holding a flock of file in d, or nil if the
// kernel's lock table cannot be read.
func lockHolders(d *oslock.Dir, file string) map[int]bool {
	id, _, err := d.Lstat(file)
	if err != nil {
		return nil
	}
	table, err := oslock.LockTable()
	if err != nil || len(table) == 0 {
		return nil // unreadable, or a sandbox that shows it empty
	}
	out := map[int]bool{}
	for _, h := range table[id] {
		out[h.PID] = true
	}
	return out
}

// procStart returns the start time of pid in clock ticks after boot
// (proc(5), /proc/PID/stat field 22).
func procStart(pid int) (uint64, bool) { return oslock.StatNumber(pid, 22) }

var selfStartTime, _ = procStart(os.Getpid())

// selfPidNS is the inode of this process's pid namespace.
var selfPidNS = func() uint64 {
	var st unix.Stat_t
	if unix.Stat("/proc/self/ns/pid", &st) != nil {
		return 0
	}
	return st.Ino
}()

func selfStart() uint64 { return selfStartTime }

// fenceOrphans kills, in rounds, every process of this user whose
// environment, as the kernel recorded it at exec, carries the term id
// (LEADERRUN_TERM), and the term's process group (as killCommand checks
// it), until a round finds none: a leftover that forks while it is killed
// leaves children for the next round, and a killed process forks no more.
// The id is random per term, so a process of another directory or another
// term never matches, however the directories are spelled. A process that
// scrubbed its environment escapes this scan; it can never pin the lock,
// though.
//
// A process already on its way out (killed through its group, or by a
// watchdog or another holder fencing the same term) has released its
// memory, and so its environment, before it closes its descriptors: which
// term it belongs to can no longer be read while it still holds what it
// held. Every such process of this user that started after the term's
// leaderrun did (but that leaderrun itself) is waited for, not killed.
//
// It reports whether no such process was left, or false after ctx ends.
func fenceOrphans(ctx context.Context, r *termRecord) bool {
	want := []byte(termEnv + "=" + r.id)
	buf := make([]byte, 256<<10)
	for ctx.Err() == nil {
		victims, exiting := scanTerm(want, buf, r.wstart, r.wpid)
		if len(victims) == 0 && len(exiting) == 0 {
			return true
		}
		for _, pid := range victims {
			if pid > 1 { // never kill(-1) or kill(0)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if r.commandStarted && !foreignPids(r) {
			if start, ok := procStart(r.pgid); !ok || (r.pgid == r.cpid && start == r.cstart) {
				killGroup(r.pgid)
			}
		}
		for _, pid := range append(victims, exiting...) {
			oslock.WaitGone(ctx, pid)
		}
	}
	return false
}

// scanTerm lists the living processes of this user, other than this one,
// whose environment has the entry want (victims), and those started at
// since or later that are exiting, whose environment cannot be read any
// more, but for the term's own leaderrun (wrapper), which holds nothing
// of COMMAND's.
func scanTerm(want, buf []byte, since uint64, wrapper int) (victims, exiting []int) {
	self := os.Getpid()
	uid := os.Getuid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, nil
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, out := readEnviron(e.Name(), buf)
		if !out && !hasEntry(env, want) {
			continue
		}
		// Only the user's own processes: root must not kill another
		// user's process that copied the variable.
		if info, err := e.Info(); err != nil || int(info.Sys().(*syscall.Stat_t).Uid) != uid {
			continue
		}
		if oslock.StateOf(pid) == oslock.ProcGone {
			continue
		}
		if out {
			if start, ok := procStart(pid); ok && start >= since && pid != wrapper {
				exiting = append(exiting, pid)
			}
		} else {
			victims = append(victims, pid)
		}
	}
	return victims, exiting
}

// hasEntry reports whether the NUL-separated environment env has the
// entry want, whole.
func hasEntry(env, want []byte) bool {
	if !bytes.Contains(env, want) {
		return false
	}
	for len(env) > 0 {
		i := bytes.IndexByte(env, 0)
		if i < 0 {
			i = len(env)
		}
		if bytes.Equal(env[:i], want) {
			return true
		}
		env = env[min(i+1, len(env)):]
	}
	return false
}

// Process flags, proc(5) /proc/PID/stat field 9 (include/linux/sched.h).
const (
	pfExiting = 0x00000004
	pfKthread = 0x00200000
)

// readEnviron reads the environment of process pid, or reports that it is
// exiting (out) and its environment is gone. Once the leader thread has
// exited, /proc/PID/environ fails with ESRCH, which happens first when a
// process is killed: its other threads, still holding what it held, are
// then asked instead. Kernel threads read empty, and so does a process
// started with an empty environment (env -i): neither is exiting.
func readEnviron(pid string, buf []byte) (env []byte, out bool) {
	env, err := readSmall("/proc/"+pid+"/environ", buf)
	if err == nil && len(env) > 0 {
		return env, false
	}
	st, err := readSmall("/proc/"+pid+"/stat", buf)
	if err != nil {
		return nil, false // reaped meanwhile
	}
	flags, _ := strconv.ParseUint(string(oslock.StatField(st, 9)), 10, 32)
	if flags&pfKthread != 0 {
		return nil, false
	}
	if state := oslock.StatField(st, 3); len(state) == 1 && state[0] == 'Z' {
		// The leader has exited; another thread may still run.
		tasks, _ := os.ReadDir("/proc/" + pid + "/task")
		for _, t := range tasks {
			if t.Name() == pid {
				continue
			}
			if env, err := readSmall("/proc/"+pid+"/task/"+t.Name()+"/environ", buf); err == nil && len(env) > 0 {
				return env, false
			}
		}
		return nil, true
	}
	return nil, flags&pfExiting != 0
}

// readSmall reads a /proc file with one read(2) into buf: environ is
// returned whole by one read, and os.ReadFile's stat and growing reads
// triple the cost of the fence.
func readSmall(path string, buf []byte) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	n, err := syscall.Read(fd, buf)
	if err != nil || n < 0 {
		return nil, err
	}
	return buf[:n], nil
}
