//go:build darwin || freebsd

package oslock

import "golang.org/x/sys/unix"

func fsTypeName(fd int) string {
	var st unix.Statfs_t
	if unix.Fstatfs(fd, &st) != nil {
		return ""
	}
	b := st.Fstypename[:]
	n := 0
	for n < len(b) && b[n] != 0 {
		n++
	}
	s := make([]byte, n)
	for i := range s {
		s[i] = byte(b[i])
	}
	return string(s)
}
