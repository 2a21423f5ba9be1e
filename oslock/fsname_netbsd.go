package oslock

import "golang.org/x/sys/unix"

// fsTypeName is the name of the filesystem type of fd, "" if unknown.
func fsTypeName(fd int) string {
	var st unix.Statvfs_t
	if unix.Fstatvfs(fd, &st) != nil {
		return ""
	}
	return cString(st.Fstypename[:])
}
