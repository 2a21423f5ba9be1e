package oslock

import (
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

const procFD = true

// Filesystems whose flock is emulated, per-client or absent (statfs(2) magics).
var unsafeFS = map[int64]string{
	0x6969:     "nfs",
	0x517b:     "smb",
	0xff534d42: "cifs",
	0xfe534d42: "smb2",
	0x65735546: "fuse",
	0x01021997: "9p",
	0x00c36400: "ceph",
	0x47504653: "gpfs",
	0x0bd00bd0: "lustre",
	0x5346414f: "afs",
	0x6b414653: "afs",
}

func checkFS(fd int, path string) error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return &fs.PathError{Op: "statfs", Path: path, Err: err}
	}
	if name, bad := unsafeFS[int64(st.Type)&0xffffffff]; bad {
		return fmt.Errorf("%w: %s is on a %s filesystem, where flock is not reliable between processes; use a local directory",
			ErrUnsupported, path, name)
	}
	return nil
}
