package oslock

import (
	"errors"
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
