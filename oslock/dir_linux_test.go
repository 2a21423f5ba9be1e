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

// A read-only or full filesystem gives the system's error, naming the path.
func TestDirReadOnlyAndFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs (and root ignores chmod, so a mount is the only read-only dir)")
	}
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k,mode=0700"); err != nil {
		t.Skipf("cannot mount tmpfs here (%v): a container without CAP_SYS_ADMIN", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	d, err := OpenDir(mnt, DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// Fill it.
	fill, _ := os.Create(filepath.Join(mnt, "fill"))
	buf := make([]byte, 4096)
	for {
		if _, err := fill.Write(buf); err != nil {
			break
		}
	}
	fill.Close()
	f, err := d.OpenFile("new", os.O_RDWR|os.O_CREATE, 0o600)
	if err == nil {
		_, err = f.Write([]byte("x"))
		f.Close()
	}
	if !errors.Is(err, unix.ENOSPC) {
		t.Errorf("write on a full filesystem: %v; want ENOSPC", err)
	}
	os.Remove(filepath.Join(mnt, "fill"))
	if err := unix.Mount("", mnt, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Skipf("cannot remount read-only: %v", err)
	}
	_, err = d.OpenFile("other", os.O_RDWR|os.O_CREATE, 0o600)
	if !errors.Is(err, unix.EROFS) || !strings.Contains(err.Error(), filepath.Join(mnt, "other")) {
		t.Errorf("create on a read-only filesystem: %v; want EROFS naming the path", err)
	}
}

// An unnamed file is named where asked, once, with what was written to
// it; one never named leaves no entry; a group-shared directory has none.
func TestUnnamedFile(t *testing.T) {
	d, err := OpenDir(t.TempDir(), DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	f, err := d.CreateUnnamed(0o600)
	if errors.Is(err, ErrUnsupported) {
		t.Skip("no O_TMPFILE here:", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("term"); err != nil {
		t.Fatal(err)
	}
	gone, err := d.CreateUnnamed(0o600)
	if err != nil {
		t.Fatal(err)
	}
	gone.Close()
	if names, _ := d.Names(); len(names) != 0 {
		t.Fatalf("unnamed files have names: %v", names)
	}
	if err := d.LinkUnnamed(f, "m"); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 16)
	if n, err := d.ReadFile("m", b); err != nil || string(b[:n]) != "term" {
		t.Fatalf("named, it reads %q, %v", b[:n], err)
	}
	if _, owner, err := d.Lstat("m"); err != nil || owner != os.Geteuid() {
		t.Fatalf("lstat: owner %d, %v", owner, err)
	}
	other, err := d.CreateUnnamed(0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := d.LinkUnnamed(other, "m"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("named over an existing file: %v, want fs.ErrExist", err)
	}
	if names, _ := d.Names(); len(names) != 1 {
		t.Fatalf("entries %v, want only m", names)
	}
	g := filepath.Join(t.TempDir(), "g")
	if err := os.Mkdir(g, 0o770); err != nil {
		t.Fatal(err)
	}
	os.Chmod(g, 0o770)
	gd, err := OpenDir(g, DirOptions{GroupShared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer gd.Close()
	if _, err := gd.CreateUnnamed(0o600); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("group-shared: %v, want ErrUnsupported", err)
	}
}
