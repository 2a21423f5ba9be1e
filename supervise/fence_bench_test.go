//go:build linux

package supervise

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/layout"
	"github.com/leaderrun/leaderrun/oslock"
)

// BenchmarkFence compares, in one run, what a new leader pays to fence
// the term before it:
//
//	old-scan      the fence before term markers recorded COMMAND: a
//	              /proc scan matching LEADERRUN_DIR and LEADERRUN_NAME
//	new-cgroup    a crashed term whose COMMAND is dead, with a cgroup:
//	              the marker, cgroup.kill, cgroup.events, rmdir
//	new-nocgroup  the same without a cgroup: pidfd, process group, and
//	              the /proc scan for the term id
//	new-scan      the fallback scan alone, matching LEADERRUN_TERM
//	new-clean     the term before ended cleanly: the lock directory is
//	              listed and holds no marker
//	term-*        what a term pays besides the fence: beginTerm and end
//	              on a clean directory, with and without a cgroup
//
// The scans are linear in the number of processes (logged).
func BenchmarkFence(b *testing.B) {
	procs, _ := os.ReadDir("/proc")
	b.Logf("%d entries in /proc", len(procs))
	b.Run("old-scan", func(b *testing.B) {
		for b.Loop() {
			oldFenceOrphans("/nonexistent", "x", true)
		}
	})
	b.Run("new-scan", func(b *testing.B) {
		for b.Loop() {
			fenceOrphans(context.Background(), &termRecord{id: "0123456789abcdef0123456789abcdef"})
		}
	})
	dead := deadPID(b)
	for _, mode := range []string{"cgroup", "nocgroup"} {
		b.Run("new-"+mode, func(b *testing.B) {
			if mode == "cgroup" && newTermCgroupProbe() == "" {
				b.Skip("no writable cgroup v2 with cgroup.kill here")
			}
			dir := b.TempDir()
			d, err := oslock.OpenDir(dir, oslock.DirOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			ctx := context.Background()
			for b.Loop() {
				b.StopTimer()
				crashedTerm(b, d, "x", dead, mode == "cgroup")
				b.StartTimer()
				fenceDir(ctx, d, "x", true)
			}
		})
	}
	// What every term pays at its start and end, fence aside: the
	// marker, and the cgroup where there is one.
	for _, mode := range []string{"cgroup", "nocgroup"} {
		b.Run("term-"+mode, func(b *testing.B) {
			if mode == "cgroup" && newTermCgroupProbe() == "" {
				b.Skip("no writable cgroup v2 with cgroup.kill here")
			}
			defer func(v bool) { noCgroup = v }(noCgroup)
			noCgroup = mode == "nocgroup"
			dir := b.TempDir()
			for b.Loop() {
				beginTerm(context.Background(), dir, "x", true, nil).End()
			}
		})
	}
	b.Run("new-clean", func(b *testing.B) {
		d, err := oslock.OpenDir(b.TempDir(), oslock.DirOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		for b.Loop() {
			fenceDir(context.Background(), d, "x", true)
		}
	})
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(b *testing.B) int {
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		b.Fatal(err)
	}
	return c.Process.Pid
}

// crashedTerm leaves in d what a term of name leaves when its leaderrun
// and COMMAND (pid dead) were killed: a marker, and an empty cgroup.
func crashedTerm(b *testing.B, d *oslock.Dir, name string, dead int, cgroup bool) {
	var id [termIDLen / 2]byte
	rand.Read(id[:])
	r := &termRecord{id: hex.EncodeToString(id[:]), wpid: dead, wstart: 1, commandStarted: true, cpid: dead, cstart: 1, pgid: dead}
	if cgroup {
		cg := newTermCgroup(r.id)
		if cg == nil {
			b.Fatal("no cgroup")
		}
		cg.dir.Close()
		r.cgroup = cg.path
	}
	f, err := d.OpenFile(layout.TermMarkerPrefix(name)+r.id, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	f.WriteString(r.String())
	f.Close()
}

// oldFenceOrphans is the fence as it was before term markers (commit
// c636f36), for comparison only.
func oldFenceOrphans(dir, name string, exclusive bool) {
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
		env, err := oldReadEnviron(e.Name(), buf)
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

// oldReadEnviron reads the environment of process pid. Once the leader
// thread has exited, /proc/PID/environ fails with ESRCH, which happens
// first when a process is killed: its other threads, still holding what it
// held, are then asked instead. (Kernel threads read empty: no fallback.)
func oldReadEnviron(pid string, buf []byte) ([]byte, error) {
	env, err := readSmall("/proc/"+pid+"/environ", buf)
	if err != syscall.ESRCH || !oldZombieLeader(pid, buf) {
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

// oldZombieLeader reports whether the leader thread of pid has exited ("Z"
// in /proc/PID/stat) while the process may still have other threads.
func oldZombieLeader(pid string, buf []byte) bool {
	st, err := readSmall("/proc/"+pid+"/stat", buf)
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(st, ')')
	return i >= 0 && i+2 < len(st) && st[i+2] == 'Z'
}
