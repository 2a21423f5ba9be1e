//go:build (darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd) && !linux

package oslock

import "fmt"

const procFD = false

// unsafeFS are the filesystem type names, as the BSDs, macOS and illumos
// report them, on which flock is not reliable between processes: network
// filesystems (NFS, SMB, AFP, WebDAV) and FUSE in its local spellings
// (fusefs on FreeBSD, fuse on OpenBSD, puffs/perfuse on NetBSD, macFUSE).
var unsafeFS = map[string]bool{
	"nfs": true, "nfs4": true, "smbfs": true, "cifs": true, "afpfs": true, "webdav": true,
	"fusefs": true, "fuse": true, "puffs": true, "perfuse": true, "macfuse": true, "osxfuse": true,
}

func checkFS(fd int, path string) error {
	name := fsTypeName(fd)
	if unsafeFS[name] {
		return fmt.Errorf("%w: %s is on a %s filesystem, where flock is not reliable between processes; use a local directory",
			ErrUnsupported, path, name)
	}
	return nil
}

// cString is the text of a NUL-terminated byte array.
func cString[T ~int8 | ~uint8](b []T) string {
	s := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}
