//go:build unix

package oslock

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// listing returns every name under dir with its mode and content, to check
// that a refused OpenDir changed nothing.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		b.WriteString(p + " " + fi.Mode().String())
		if fi.Mode().IsRegular() {
			c, _ := os.ReadFile(p)
			b.WriteString(" " + string(c))
		}
		b.WriteString("\n")
		return nil
	})
	return b.String()
}

// TestOpenDirRefuses is the bad-lock-directory matrix: each case must be
// refused with a message that says what is wrong and what to do, and
// leave everything as it was.
func TestOpenDirRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, path string) // makes path bad
		opts  DirOptions
		is    error
		says  []string
		root  bool // needs root
	}{
		{name: "missing", setup: func(t *testing.T, p string) {}, is: fs.ErrNotExist,
			says: []string{"does not exist", "mkdir -m 700"}},
		{name: "a file", setup: func(t *testing.T, p string) { os.WriteFile(p, []byte("data"), 0o600) },
			says: []string{"is not a directory"}},
		{name: "a symlink", setup: func(t *testing.T, p string) {
			real := p + "-real"
			os.Mkdir(real, 0o700)
			os.Symlink(real, p)
		}, is: ErrInsecureDir, says: []string{"is a symbolic link"}},
		{name: "a symlink with Create", setup: func(t *testing.T, p string) {
			real := p + "-real"
			os.Mkdir(real, 0o700)
			os.Symlink(real, p)
		}, opts: DirOptions{Create: true}, is: ErrInsecureDir, says: []string{"is a symbolic link"}},
		{name: "a dangling symlink with Create", setup: func(t *testing.T, p string) {
			os.Symlink(p+"-nowhere", p)
		}, opts: DirOptions{Create: true}, is: ErrInsecureDir, says: []string{"is a symbolic link"}},
		{name: "world-writable", setup: func(t *testing.T, p string) { os.Mkdir(p, 0o700); os.Chmod(p, 0o777) },
			is: ErrInsecureDir, says: []string{"writable by others (mode 0777)", "chmod o-w"}},
		{name: "sticky world-writable", setup: func(t *testing.T, p string) { os.Mkdir(p, 0o700); unix.Chmod(p, 0o1777) },
			is: ErrInsecureDir, says: []string{"writable by others (mode 1777)"}},
		{name: "group-writable", setup: func(t *testing.T, p string) { os.Mkdir(p, 0o700); os.Chmod(p, 0o770) },
			is: ErrInsecureDir, says: []string{"writable by its group (mode 0770)", "group-shared"}},
		{name: "world-writable even group-shared", setup: func(t *testing.T, p string) { os.Mkdir(p, 0o700); os.Chmod(p, 0o777) },
			opts: DirOptions{GroupShared: true}, is: ErrInsecureDir, says: []string{"writable by others"}},
		{name: "owned by another user", root: true, setup: func(t *testing.T, p string) {
			os.Mkdir(p, 0o700)
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, is: ErrInsecureDir, says: []string{"is owned by uid 65534, not by you (uid 0)", "use a directory you own"}},
		{name: "owned by another user, group-shared, not our group", root: true, setup: func(t *testing.T, p string) {
			os.Mkdir(p, 0o700)
			os.Chmod(p, 0o770)
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, opts: DirOptions{GroupShared: true}, is: ErrInsecureDir, says: []string{"is owned by uid 65534"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				t.Skip("needs root to chown")
			}
			base := t.TempDir()
			path := filepath.Join(base, "locks")
			tc.setup(t, path)
			before := listing(t, base)
			d, err := OpenDir(path, tc.opts)
			if err == nil {
				d.Close()
				t.Fatal("accepted")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the directory", err)
			}
			if after := listing(t, base); after != before {
				t.Errorf("refused OpenDir changed things:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

func TestOpenDirGroupSharedAccepted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks")
	os.Mkdir(path, 0o700)
	os.Chmod(path, 0o770)
	d, err := OpenDir(path, DirOptions{GroupShared: true})
	if err != nil {
		t.Fatalf("group-writable directory with GroupShared: %v", err)
	}
	d.Close()
}

// Inside the directory, a symbolic link where a file or subdirectory is
// expected is refused, never followed, and the link's target is untouched.
func TestDirRefusesPlantedSymlinks(t *testing.T) {
	base := t.TempDir()
	path := filepath.Join(base, "locks")
	os.Mkdir(path, 0o700)
	outside := filepath.Join(base, "outside")
	os.Mkdir(outside, 0o700)
	target := filepath.Join(outside, "target")
	os.WriteFile(target, []byte("precious"), 0o600)
	os.Symlink(target, filepath.Join(path, "x.lock"))
	os.Symlink(outside, filepath.Join(path, "x.queue"))
	d, err := OpenDir(path, DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	before := listing(t, base)
	if f, err := d.OpenFile("x.lock", os.O_RDWR|os.O_CREATE, 0o600); err == nil || !errors.Is(err, ErrSymlink) || !strings.Contains(err.Error(), "remove it") {
		if f != nil {
			f.Close()
		}
		t.Errorf("OpenFile through a symlink: %v; want ErrSymlink saying to remove it", err)
	}
	if sub, err := d.Sub("x.queue", true, DirOptions{}); err == nil {
		sub.Close()
		t.Error("Sub followed a symlink")
	} else if !errors.Is(err, ErrSymlink) && !errors.Is(err, ErrInsecureDir) {
		t.Errorf("Sub through a symlink: %v; want ErrSymlink or ErrInsecureDir", err)
	}
	if after := listing(t, base); after != before {
		t.Errorf("changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
