//go:build unix

package oslock

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// In a group-shared directory, what a member creates gets the directory's
// group, also without the setgid bit on it, and a subdirectory gets mode
// 2770 so that the files other members create in it get that group too.
// An existing subdirectory of ours that lost its setgid bit or group is
// repaired.
func TestGroupSharedEntriesGetTheGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the directory a group other than ours")
	}
	const gid = 65534 // nogroup: not our primary group
	for _, setgid := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain 0770", true: "setgid 2770"}[setgid], func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "locks")
			os.Mkdir(path, 0o700)
			mode := uint32(0o770)
			if setgid {
				mode |= syscall.S_ISGID
			}
			if err := os.Chown(path, 0, gid); err != nil {
				t.Fatal(err)
			}
			syscall.Chmod(path, mode)
			d, err := OpenDir(path, DirOptions{GroupShared: true})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			f, err := d.OpenFile("x.lock", os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			checkEntry(t, filepath.Join(path, "x.lock"), gid, 0o660)
			// As an older version left it, repaired by the next open.
			os.Chown(filepath.Join(path, "x.lock"), 0, 0)
			os.Chmod(filepath.Join(path, "x.lock"), 0o600)
			f, err = d.OpenFile("x.lock", os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			checkEntry(t, filepath.Join(path, "x.lock"), gid, 0o660)
			if names, _ := d.Names(); len(names) != 1 {
				t.Errorf("entries %v; want only x.lock", names)
			}
			q, err := d.Sub("x.queue", true, DirOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checkEntry(t, filepath.Join(path, "x.queue"), gid, 0o2770)
			f, err = q.OpenFile("t1", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			checkEntry(t, filepath.Join(path, "x.queue", "t1"), gid, 0o660)
			q.Close()

			// As an older version left it: our group, no setgid.
			os.Chown(filepath.Join(path, "x.queue"), 0, 0)
			syscall.Chmod(filepath.Join(path, "x.queue"), 0o770)
			q, err = d.Sub("x.queue", false, DirOptions{})
			if err != nil {
				t.Fatal(err)
			}
			q.Close()
			checkEntry(t, filepath.Join(path, "x.queue"), gid, 0o2770)
		})
	}
}

func checkEntry(t *testing.T, path string, gid int, mode uint32) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	if int(st.Gid) != gid || uint32(st.Mode)&0o7777 != mode {
		t.Errorf("%s: group %d mode %04o; want group %d mode %04o", path, st.Gid, st.Mode&0o7777, gid, mode)
	}
}
