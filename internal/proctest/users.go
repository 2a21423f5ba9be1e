//go:build unix

package proctest

import (
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The tests that run a process as another user (a hostile one, members of
// a shared group) need root, a throwaway account, a directory that account
// can reach and a copy of the test binary it can run.

// Accounts are machine-wide, and the tests of several checkouts may run at
// once: each test process names its accounts BASE-PID, and removes those
// of processes that are gone (an interrupted run) before it adds its own.

// User creates a throwaway system user BASE-PID with a private group of
// its own (useradd --user-group), home home (not created) and the
// supplementary groups groups (names returned by [Group]), removes it when
// tb ends, and returns its name and ids. It skips tb unless it runs as
// root with useradd on PATH.
func User(tb testing.TB, base, home string, groups ...string) (name string, uid, gid int) {
	tb.Helper()
	needRoot(tb, "useradd", "userdel")
	args := []string{"--system", "--no-create-home", "--home-dir", home, "--shell", "/usr/sbin/nologin", "--user-group"}
	if len(groups) > 0 {
		args = append(args, "--groups", strings.Join(groups, ","))
	}
	name = account(tb, base, "/etc/passwd", "useradd", "userdel", args...)
	u, err := user.Lookup(name)
	if err != nil {
		tb.Fatal(err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	if uid == 0 || gid == 0 {
		tb.Fatalf("%s has uid %d gid %d", name, uid, gid)
	}
	return name, uid, gid
}

// Group creates the throwaway system group BASE-PID (for [User]'s
// groups), removes it when tb ends (after the users created later, which
// cleanups remove first), and returns its name and gid. It skips tb
// unless it runs as root with groupadd on PATH.
func Group(tb testing.TB, base string) (name string, gid int) {
	tb.Helper()
	needRoot(tb, "groupadd", "groupdel")
	name = account(tb, base, "/etc/group", "groupadd", "groupdel", "--system")
	g, err := user.LookupGroup(name)
	if err != nil {
		tb.Fatal(err)
	}
	gid, _ = strconv.Atoi(g.Gid)
	return name, gid
}

// account removes the accounts BASE-N in db (/etc/passwd or /etc/group)
// of processes N that are gone, creates BASE-PID with add and args, and
// removes it with del when tb ends.
func account(tb testing.TB, base, db, add, del string, args ...string) string {
	tb.Helper()
	if b, err := os.ReadFile(db); err == nil {
		for line := range strings.Lines(string(b)) {
			old, _, _ := strings.Cut(line, ":")
			pid, ok := strings.CutPrefix(old, base+"-")
			if n, err := strconv.Atoi(pid); ok && err == nil && n > 0 {
				if _, err := os.Stat("/proc/" + pid); os.IsNotExist(err) {
					exec.Command(del, old).Run()
				}
			}
		}
	}
	name := base + "-" + strconv.Itoa(os.Getpid())
	exec.Command(del, name).Run() // an earlier test of this process that failed to clean up
	if out, err := exec.Command(add, append(args, name)...).CombinedOutput(); err != nil {
		tb.Fatalf("%s %s: %v: %s", add, name, err, out)
	}
	tb.Cleanup(func() {
		if out, err := exec.Command(del, name).CombinedOutput(); err != nil {
			tb.Errorf("%s %s: %v: %s", del, name, err, out)
		}
	})
	return name
}

func needRoot(tb testing.TB, tools ...string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root to create a throwaway account and run a process as it")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			tb.Skipf("needs %s to create a throwaway account (.ci/run installs passwd)", tool)
		}
	}
}

// SharedTempDir returns a fresh temporary directory that every user can
// reach (it and its parents up to the system's temporary directory get
// mode 0755), as another user can reach /tmp: what guards a lock
// directory must be its own mode, not an unreachable parent.
func SharedTempDir(tb testing.TB) string {
	tb.Helper()
	base := tb.TempDir()
	for d := base; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	return base
}

// CopyBinary copies the running test binary into dir (made with
// SharedTempDir, so that another user can run it there) and returns the
// copy's path.
func CopyBinary(tb testing.TB, dir string) string {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	src, err := os.Open(exe)
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	to := filepath.Join(dir, filepath.Base(exe))
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		tb.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		tb.Fatal(err)
	}
	return to
}
