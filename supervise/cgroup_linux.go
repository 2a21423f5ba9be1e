package supervise

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A term's cgroup: where leaderrun may create a cgroup v2 below its own
// (root, or a delegated subtree such as systemd's user@UID.service), each
// COMMAND of the term starts in <own cgroup>/leaderrun-<id> (clone3
// CLONE_INTO_CGROUP, so not even its first fork escapes). The kernel then
// knows every process of the term, also those that called setsid or
// setpgid, and kills them all with one write to cgroup.kill (Linux 5.14),
// which also stops a fork racing with it. Without such a cgroup, the fence
// falls back to the process group and a /proc scan.

// cgroupRoots are where cgroup v2 is mounted: alone (unified), or next to
// v1 hierarchies (hybrid).
var cgroupRoots = []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}

var noCgroup = strings.Contains(testFence, "nocgroup")

// notifyInterval, in ms, is the kernel's bound on cgroup file events.
const notifyInterval = 20

type termCgroup struct {
	path string
	dir  *os.File
}

// newTermCgroup creates the term's cgroup, or returns nil where the
// cgroup v2 this process is in cannot be written or lacks cgroup.kill.
func newTermCgroup(id string) *termCgroup { return newTermCgroupIn(ownCgroup(), id) }

// newTermCgroupIn is newTermCgroup in own, this process's cgroup as
// ownCgroup returned it.
func newTermCgroupIn(own, id string) *termCgroup {
	if own == "" || noCgroup {
		return nil
	}
	path := filepath.Join(own, "leaderrun-"+id)
	if err := unix.Mkdir(path, 0o755); err != nil {
		return nil
	}
	if unix.Access(filepath.Join(path, "cgroup.kill"), unix.W_OK) != nil {
		unix.Rmdir(path)
		return nil
	}
	dir, err := os.Open(path)
	if err != nil {
		unix.Rmdir(path)
		return nil
	}
	// Locked for as long as it is ours: sweepCgroups removes only a
	// cgroup nobody holds.
	if unix.Flock(int(dir.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		dir.Close()
		unix.Rmdir(path)
		return nil
	}
	return &termCgroup{path: path, dir: dir}
}

// sweepAge is how old a term's cgroup must be before sweepCgroups may
// take it for left behind: one younger may not be locked yet.
var sweepAge = 10 * time.Second

// sweepCgroups removes, once per process, the term cgroups in own (this
// process's cgroup, as ownCgroup returned it) that a supervisor left behind: killed while it
// waited with a term prepared (Prepare), it left its cgroup empty and
// unlocked. A cgroup that still holds a process (a COMMAND of a term
// that did not end) is left to the fence, which knows it by its marker.
func sweepCgroups(own string) {
	if own != "" && !noCgroup {
		sweepOnce.Do(func() { sweep(own) })
	}
}

var sweepOnce sync.Once

func sweep(own string) {
	ents, err := os.ReadDir(own)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "leaderrun-") {
			continue
		}
		path := filepath.Join(own, e.Name())
		if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < sweepAge {
			continue
		}
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil {
			unix.Rmdir(path) // fails, harmlessly, if a process is in it
		}
		unix.Close(fd)
	}
}

// ownCgroup returns the directory of this process's cgroup v2 if this
// process may create cgroups in it and nobody else manages what is below
// it, or "". systemd owns the cgroups of its units unless it delegated
// them (Delegate=yes; https://systemd.io/CGROUP_DELEGATION): a delegated
// cgroup is owned by the user it was delegated to, or carries the
// trusted.delegate (or user.delegate) extended attribute. The root of a
// cgroup namespace (a container's) is taken as this process's own.
func ownCgroup() string {
	var buf [4096]byte
	b, err := readSmall("/proc/self/cgroup", buf[:])
	if err != nil {
		return ""
	}
	var rel string
	for _, line := range strings.Split(string(b), "\n") {
		if r, ok := strings.CutPrefix(line, "0::"); ok {
			rel = r
		}
	}
	if !strings.HasPrefix(rel, "/") || strings.Contains(rel, " (deleted)") {
		return ""
	}
	for _, root := range cgroupRoots {
		var st unix.Statfs_t
		if unix.Statfs(root, &st) != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
			continue
		}
		dir := filepath.Join(root, rel)
		if unix.Access(dir, unix.W_OK|unix.X_OK) != nil || (rel != "/" && !delegated(dir)) {
			return ""
		}
		return dir
	}
	return ""
}

func delegated(dir string) bool {
	var st unix.Stat_t
	if unix.Stat(dir, &st) == nil && int(st.Uid) == os.Geteuid() && st.Uid != 0 {
		return true
	}
	for _, attr := range []string{"trusted.delegate", "user.delegate"} {
		var v [8]byte
		if n, err := unix.Getxattr(dir, attr, v[:]); err == nil && string(v[:n]) == "1" {
			return true
		}
	}
	return false
}

// validCgroup reports whether path, read from a marker, can be the cgroup
// of the term id: the fence writes cgroup.kill nowhere else.
func validCgroup(path, id string) bool {
	if path != filepath.Clean(path) || filepath.Base(path) != "leaderrun-"+id {
		return false
	}
	for _, root := range cgroupRoots {
		if strings.HasPrefix(path, root+"/") {
			return true
		}
	}
	return false
}

// prepare makes COMMAND start in the cgroup.
func (c *termCgroup) prepare(cmd *exec.Cmd) {
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = int(c.dir.Fd())
}

// remove removes the cgroup once COMMAND has been stopped: at once if it
// is empty, or after killing what is left in it. It reports whether the
// cgroup is gone.
func (c *termCgroup) remove(ctx context.Context) bool {
	c.dir.Close()
	if err := unix.Rmdir(c.path); err == nil || err == unix.ENOENT {
		return true
	}
	cgroupKill(c.path)
	return cgroupRemove(ctx, c.path)
}

// cgroupKill sends SIGKILL to every process in the cgroup at path. It
// reports whether it could: not for another user's cgroup (a group-shared
// directory), nor for one this process cannot see at that path (another
// cgroup or mount namespace wrote the marker, or a concurrent fence has
// just removed it): the fence then falls back to the process group and
// the term id.
func cgroupKill(path string) bool {
	fd, err := unix.Open(filepath.Join(path, "cgroup.kill"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, []byte("1"))
	return err == nil
}

// cgroupRemove waits until the cgroup at path has no process left (its
// cgroup.events says "populated 0"; the kernel wakes poll(2) with POLLPRI
// when that changes) and removes it. It reports whether it is gone, or
// false once ctx ends. A process that has exited counts as gone even if
// nobody reaped it.
//
// The kernel sends at most one such event per cgroup file every 20 ms
// (CGROUP_FILE_NOTIFY_MIN_INTV, kernel/cgroup/cgroup.c), later ones by
// timer, and a cgroup removed meanwhile (by a watchdog fencing the same
// term) drops the pending one: so the wait also looks again every
// notifyInterval. A cgroup that was removed was empty: rmdir(2) refuses
// any other.
func cgroupRemove(ctx context.Context, path string) bool {
	fd, err := unix.Open(filepath.Join(path, "cgroup.events"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err == unix.ENOENT
	}
	defer unix.Close(fd)
	cancel, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return false
	}
	defer unix.Close(cancel)
	stop := context.AfterFunc(ctx, func() {
		unix.Write(cancel, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	})
	defer stop()
	var buf [256]byte
	for {
		n, err := unix.Pread(fd, buf[:], 0)
		if err != nil {
			var st unix.Stat_t
			return unix.Stat(path, &st) == unix.ENOENT
		}
		if bytes.Contains(buf[:n], []byte("populated 0")) {
			break
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}, {Fd: int32(cancel), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, notifyInterval); err != nil && err != unix.EINTR {
			return false
		}
		if fds[1].Revents != 0 {
			return false
		}
	}
	// Exited tasks can keep the cgroup busy for a moment after it says
	// it is empty (they are still being released).
	for i := 0; ; i++ {
		err := unix.Rmdir(path)
		if err == nil || err == unix.ENOENT {
			return true
		}
		if err != unix.EBUSY || i == 50 || ctx.Err() != nil {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// cgroupPopulated reports whether the cgroup at path has a process left
// (cgroup.events); ok is false without a cgroup (path ""), or when it
// cannot be read.
func cgroupPopulated(path string) (populated, ok bool) {
	if path == "" {
		return false, false
	}
	var buf [256]byte
	b, err := readSmall(filepath.Join(path, "cgroup.events"), buf[:])
	switch {
	case err != nil:
		return false, false
	case bytes.Contains(b, []byte("populated 0")):
		return false, true
	case bytes.Contains(b, []byte("populated 1")):
		return true, true
	}
	return false, false
}

// cgroupProcs lists the processes in the cgroup at path (cgroup.procs);
// ok is false without a cgroup (path ""), or when it cannot be read.
func cgroupProcs(path string) (pids []int, ok bool) {
	if path == "" {
		return nil, false
	}
	b, err := readSmall(filepath.Join(path, "cgroup.procs"), make([]byte, 64<<10))
	if err != nil {
		return nil, false
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, true
}
