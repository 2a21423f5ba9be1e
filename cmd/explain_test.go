//go:build linux

package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"

	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"

	"golang.org/x/sys/unix"
)

// mountTmpfs mounts a private tmpfs with options at a new directory, for
// the test's life. It needs root; the test is skipped otherwise.
func mountTmpfs(t *testing.T, options string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := filepath.Join(t.TempDir(), "locks")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=700,"+options); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// runCLI runs the command line in-process and returns its exit code and
// message. Only for cases that fail before COMMAND would start.
func runCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := New().run(ctx, append([]string{"leaderrun"}, args...))
	code := ExitCode(err)
	if err != nil {
		if _, ok := err.(*exitError); !ok {
			err = classify(err)
		}
		return code, err.Error()
	}
	return code, ""
}

func TestDirReadOnly(t *testing.T) {
	dir := mountTmpfs(t, "ro")
	code, msg := runCLI(t, "--dir", dir, "--name", "a", "--", "true")
	if code != ExitCantCreate {
		t.Errorf("exit %d, want %d (%s)", code, ExitCantCreate, msg)
	}
	want := "leaderrun: cannot write in the lock directory " + dir + ": its filesystem is read-only; give a writable directory with --dir or LEADERRUN_DIR"
	if msg != want {
		t.Errorf("message\n%s\nwant\n%s", msg, want)
	}
	// Reading works on a read-only directory.
	if code, msg := runCLI(t, "status", "--dir", dir); code != ExitOK {
		t.Errorf("status: exit %d (%s)", code, msg)
	}
}

func TestDirFull(t *testing.T) {
	dir := mountTmpfs(t, "size=16k")
	// Fill it to the last block.
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := f.Write(bytes.Repeat([]byte{'x'}, 4096)); err != nil {
			break
		}
	}
	f.Close()
	code, msg := runCLI(t, "--dir", dir, "--name", "a", "--", "true")
	if code != ExitCantCreate {
		t.Errorf("exit %d, want %d (%s)", code, ExitCantCreate, msg)
	}
	if !strings.HasPrefix(msg, "leaderrun: cannot write in the lock directory "+dir+": its filesystem is full (no space left on device); free some space") {
		t.Errorf("message: %s", msg)
	}
}

func TestStartFailureCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		msg  string
	}{
		{&os.PathError{Op: "fork/exec", Path: "/bin/x", Err: unix.EMFILE}, ExitOSErr, "leaderrun: cannot start x: out of file descriptors (EMFILE"},
		{&os.PathError{Op: "pipe", Err: unix.ENFILE}, ExitOSErr, "leaderrun: cannot start x: the system is out of file descriptors (ENFILE"},
		{&os.PathError{Op: "fork/exec", Path: "/bin/x", Err: unix.EAGAIN}, ExitOSErr, "leaderrun: cannot start x: too many processes (EAGAIN"},
		{&os.PathError{Op: "fork/exec", Path: "/bin/x", Err: unix.ENOMEM}, ExitOSErr, "leaderrun: cannot start x: out of memory"},
		{&os.PathError{Op: "fork/exec", Path: "/bin/x", Err: unix.EACCES}, ExitNoExec, "leaderrun: cannot execute x"},
		{&os.PathError{Op: "fork/exec", Path: "/bin/x", Err: unix.ENOENT}, ExitNotFound, "leaderrun: x: command not found"},
	} {
		err := startFailure("x", tc.err)
		if got := ExitCode(err); got != tc.code || !strings.HasPrefix(err.Error(), tc.msg) {
			t.Errorf("%v: exit %d %q, want %d %q...", tc.err, got, err, tc.code, tc.msg)
		}
	}
}

// TestCodeFor maps each error of the election layer to its exit code,
// among them those no testscript can provoke here: an unsupported or
// network filesystem (69) and an unexpected failure (70).
func TestCodeFor(t *testing.T) {
	for _, c := range []struct {
		err  error
		code int
	}{
		{elect.ErrInvalidName, ExitUsage},
		{elect.ErrCorrupt, ExitDataErr},
		{fmt.Errorf("open: %w", elect.ErrUnsupported), ExitUnavailable},
		{elect.ErrInsecureDir, ExitNoPerm},
		{elect.ErrBusy, ExitConflict},
		{elect.ErrStolen, ExitStolen},
		{elect.ErrLockLost, ExitLockLost},
		{syscall.EROFS, ExitCantCreate},
		{syscall.EMFILE, ExitOSErr},
		{errors.New("something else"), ExitSoftware},
	} {
		if got := ExitCode(classify(c.err)); got != c.code {
			t.Errorf("%v: exit %d, want %d", c.err, got, c.code)
		}
	}
}

// The default lock directory cannot be created on a read-only home
// (ProtectHome=read-only, a read-only mount): 73 with the path and the
// cause, not 77 "run leaderrun again", which would change nothing.
func TestDefaultDirReadOnlyHome(t *testing.T) {
	home := mountTmpfs(t, "ro")
	dir := filepath.Join(home, ".local", "state", "leaderrun")
	err := explainIn(dir, false, fmt.Errorf("oslock: cannot create lock directory: %w", &os.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOENT}))
	if code := ExitCode(err); code != ExitCantCreate {
		t.Errorf("exit %d, want %d (%v)", code, ExitCantCreate, err)
	}
	want := "leaderrun: cannot create the default lock directory " + dir + ": " + home + " is on a read-only filesystem (a read-only mount, or ProtectHome=read-only); give a private directory of your own with --dir DIR or LEADERRUN_DIR (mkdir -m 700 DIR)"
	if err.Error() != want {
		t.Errorf("message\n%v\nwant\n%s", err, want)
	}
}

// A home out of inodes: 73, full, with the path.
func TestDefaultDirHomeOutOfInodes(t *testing.T) {
	home := mountTmpfs(t, "nr_inodes=8")
	for i := 0; ; i++ {
		if err := os.Mkdir(filepath.Join(home, fmt.Sprint("filler", i)), 0o700); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	dir := filepath.Join(home, ".local", "state", "leaderrun")
	err := explainIn(dir, false, fmt.Errorf("oslock: cannot create lock directory: %w", &os.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOENT}))
	if code := ExitCode(err); code != ExitCantCreate {
		t.Errorf("exit %d, want %d (%v)", code, ExitCantCreate, err)
	}
	if want := "leaderrun: cannot create the default lock directory " + dir + ": the filesystem of " + home + " is full (no space left on device: no space or no inodes left; see df -h and df -i)"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("message\n%v\nwant it to start with\n%s", err, want)
	}
}
