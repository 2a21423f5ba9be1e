package oslock

import "golang.org/x/sys/unix"

// anyChild, as a Watch's child, matches events about every entry and the
// directory itself: no file name holds a NUL byte.
const anyChild = "\x00"

func watchEntries(path string, writes bool) (*Watch, error) {
	mask := uint32(unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF)
	if writes {
		mask |= unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MODIFY
	}
	return addWatch(path, anyChild, mask)
}
