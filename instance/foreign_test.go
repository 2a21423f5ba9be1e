package instance_test

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestForeignUIDRefused launches as another user, in a lock directory
// shared with that user's group, while root is the primary: the launch is
// refused with a line naming the primary and never becomes one, nor
// reaches it.
func TestForeignUIDRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a launch as another user (CI runs as root)")
	}
	const name = "leaderrun-bus-test" // shared with the bus package's test
	u, err := user.Lookup(name)
	if err != nil {
		if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
			t.Skipf("cannot create a throwaway user: useradd: %v: %s", err, out)
		}
		if u, err = user.Lookup(name); err != nil {
			t.Skip(err)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	base, err := os.MkdirTemp("", "instuid")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	dir := filepath.Join(base, "locks")
	if err := os.Mkdir(dir, 0o770); err != nil {
		t.Fatal(err)
	}
	os.Chown(dir, 0, gid)
	os.Chmod(dir, 0o770)
	exe, _ := os.Executable()
	bin, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	copyExe := filepath.Join(base, "instance.test")
	if err := os.WriteFile(copyExe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	p := startApp(t, dir, "app", "INST_GROUP=1")
	p.expect(t, "primary ")

	cmd := exec.CommandContext(testCtx(t), copyExe, "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"=app", "INST_DIR="+dir, "INST_NAME=app", "INST_GROUP=1", "INST_ACK=2s")
	cmd.Dir = base
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	if err == nil || strings.HasPrefix(string(out), "primary ") {
		t.Fatalf("foreign launch: %v, %s; want it refused", err, out)
	}
	if !strings.Contains(string(out), "another user") || !strings.Contains(string(out), strconv.Itoa(p.pid())) {
		t.Errorf("foreign launch said %q; want it refused as another user's, naming pid %d", out, p.pid())
	}
	t.Logf("%s", out)
}
