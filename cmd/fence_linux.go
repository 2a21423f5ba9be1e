package cmd

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/oslock"
)

// fenceOrphans kills what an earlier term of the same lock left running
// because its leaderrun died without stopping it (SIGKILL, OOM killer). The
// kernel drops a dead process's flock before it delivers Pdeathsig to its
// child, and Pdeathsig reaches only the direct child, so without this a new
// COMMAND could start while the old one, or its grandchildren, still run.
//
// A process belongs to a term of name in dir when its environment, as the
// kernel recorded it at exec, carries LEADERRUN_DIR, LEADERRUN_NAME and the
// LEADERRUN_PID of its leaderrun. As exclusive leader every such process of
// another leaderrun is a leftover; as a shared holder only those whose
// leaderrun is gone are. A process that scrubbed its environment escapes
// this fence; it can never pin the lock, though.
//
// It returns once the leftovers are gone, or after a bounded wait.
func fenceOrphans(dir, name string, exclusive bool) {
	self := os.Getpid()
	uid := os.Getuid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	wantDir := []byte("LEADERRUN_DIR=" + dir)
	wantName := []byte("LEADERRUN_NAME=" + name)
	var victims []int
	buf := make([]byte, 256<<10)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := readEnviron(e.Name(), buf)
		if err != nil || !bytes.Contains(env, []byte("LEADERRUN_PID=")) {
			continue
		}
		var owner int
		var okDir, okName bool
		for _, kv := range bytes.Split(env, []byte{0}) {
			switch {
			case bytes.Equal(kv, wantDir):
				okDir = true
			case bytes.Equal(kv, wantName):
				okName = true
			case bytes.HasPrefix(kv, []byte("LEADERRUN_PID=")):
				owner, _ = strconv.Atoi(string(kv[len("LEADERRUN_PID="):]))
			}
		}
		if !okDir || !okName || owner == self || owner == 0 {
			continue
		}
		if !exclusive && !isZombie(owner) {
			continue
		}
		// Only the user's own processes: root must not kill another
		// user's process that copied these variables.
		if info, err := e.Info(); err != nil || int(info.Sys().(*syscall.Stat_t).Uid) != uid {
			continue
		}
		victims = append(victims, pid)
	}
	if len(victims) == 0 {
		return
	}
	for _, pid := range victims {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, pid := range victims {
		oslock.WaitGone(ctx, pid)
	}
}

// readEnviron reads the environment of process pid. Once the leader
// thread has exited, /proc/PID/environ fails with ESRCH, which happens
// first when a process is killed: its other threads, still holding what it
// held, are then asked instead. (Kernel threads read empty: no fallback.)
func readEnviron(pid string, buf []byte) ([]byte, error) {
	env, err := readSmall("/proc/"+pid+"/environ", buf)
	if err != syscall.ESRCH || !zombieLeader(pid, buf) {
		// Kernel threads give ESRCH too (they have no memory map);
		// only a zombie leader may still have threads to ask.
		return env, err
	}
	tasks, _ := os.ReadDir("/proc/" + pid + "/task")
	for _, t := range tasks {
		if t.Name() == pid {
			continue
		}
		if env, err := readSmall("/proc/"+pid+"/task/"+t.Name()+"/environ", buf); err == nil && len(env) > 0 {
			return env, nil
		}
	}
	return env, err
}

// zombieLeader reports whether the leader thread of pid has exited ("Z"
// in /proc/PID/stat) while the process may still have other threads.
func zombieLeader(pid string, buf []byte) bool {
	st, err := readSmall("/proc/"+pid+"/stat", buf)
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(st, ')')
	return i >= 0 && i+2 < len(st) && st[i+2] == 'Z'
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
