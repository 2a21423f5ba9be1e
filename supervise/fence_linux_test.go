package supervise

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary as a process whose leader thread has exited while its
// other threads run on, holding a lock: ps shows it as "Zl". Every process
// killed with SIGKILL passes through that state when its threads do not
// all exit at once, and until the last one is gone it still holds its
// descriptors, flocks and listening sockets.
func init() {
	if os.Getenv("LEADERRUN_TEST_ROLE") != "zombie-leader" {
		return
	}
	f, err := os.OpenFile(os.Getenv("T_LOCK"), os.O_RDWR, 0)
	if err == nil {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
	}
	if err != nil {
		os.Stdout.WriteString("error " + err.Error() + "\n")
		os.Exit(2)
	}
	go func() {
		for {
			time.Sleep(time.Hour)
		}
	}()
	os.Stdout.WriteString("locked\n")
	// Package init runs on the main thread, locked to it; exit(2), not
	// exit_group(2), ends that thread alone.
	syscall.RawSyscall(syscall.SYS_EXIT, 0, 0, 0)
}

// startZombieLeader starts the helper and waits until its leader thread
// has exited while it still holds a flock of lock.
func startZombieLeader(t *testing.T, lock string, env ...string) *exec.Cmd {
	t.Helper()
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), append(env, "LEADERRUN_TEST_ROLE=zombie-leader", "T_LOCK="+lock)...)
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Process.Kill()
		c.Wait()
	})
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "locked\n" {
		t.Fatalf("helper said %q", line)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(c.Process.Pid) + "/stat")
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 && i+2 < len(s) && s[i+2] == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("helper's leader thread did not exit within 10s: %s", s)
		}
		time.Sleep(time.Millisecond)
	}
	if lockFree(t, lock) {
		t.Fatal("the helper lost its lock with its leader thread; the test proves nothing here")
	}
	return c
}

func lockFree(t *testing.T, path string) bool {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return true
	}
	if err != unix.EWOULDBLOCK {
		t.Fatal(err)
	}
	return false
}

// TestIsZombieThreads: a process whose leader thread is a zombie is not
// gone while another of its threads runs.
func TestIsZombieThreads(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "lock")
	if err := os.WriteFile(lock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := startZombieLeader(t, lock)
	if isZombie(c.Process.Pid) {
		t.Errorf("isZombie(%d) = true for a process that still runs threads and holds a flock", c.Process.Pid)
	}
	c.Process.Kill()
	c.Wait()
	if !isZombie(c.Process.Pid) {
		t.Errorf("isZombie(%d) = false after it was reaped", c.Process.Pid)
	}
}

// TestFenceZombieLeader: the orphan fence finds a leftover whose leader
// thread has exited (its environ then reads empty), kills it, and returns
// only once it is gone, so that what it held is free for the next
// COMMAND.
func TestFenceZombieLeader(t *testing.T) {
	tmp := t.TempDir()
	lock := filepath.Join(tmp, "lock")
	if err := os.WriteFile(lock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	id := strings.Repeat("ab", termIDLen/2)
	startZombieLeader(t, lock, termEnv+"="+id)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	fenceOrphans(ctx, &termRecord{id: id})
	if !lockFree(t, lock) {
		t.Error("the fence returned while a leftover of an earlier term still held its flock")
	}
}
