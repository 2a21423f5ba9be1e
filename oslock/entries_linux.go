package oslock

import (
	"fmt"

	"golang.org/x/sys/unix"
)

func watchEntries(path string, writes bool) (*Watch, error) {
	mask := uint32(unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW | unix.IN_MASK_ADD | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF)
	if writes {
		mask |= unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MODIFY
	}
	sentinel.Lock()
	defer sentinel.Unlock()
	if err := startSentinel(); err != nil {
		return nil, err
	}
	rc, err := sentinel.f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var wd int
	var werr error
	rc.Control(func(fd uintptr) { wd, werr = unix.InotifyAddWatch(int(fd), path, mask) })
	if werr != nil {
		return nil, fmt.Errorf("oslock: inotify_add_watch %s: %w", path, werr)
	}
	w := &Watch{wd: int32(wd), C: make(chan struct{}, 1)}
	sentinel.watches[w.wd] = append(sentinel.watches[w.wd], w)
	return w, nil
}
