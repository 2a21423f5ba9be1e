//go:build unix && !linux

package oslock

import (
	"fmt"

	"golang.org/x/sys/unix"
)

const procFD = false

var unsafeFS = map[string]bool{"nfs": true, "smbfs": true, "afpfs": true, "webdav": true, "fusefs": true, "macfuse": true, "osxfuse": true}

func checkFS(fd int, path string) error {
	name := fsTypeName(fd)
	if unsafeFS[name] {
		return fmt.Errorf("%w: %s is on a %s filesystem, where flock is not reliable between processes; use a local directory",
			ErrUnsupported, path, name)
	}
	return nil
}

var _ = unix.Fstatfs
