//go:build unix

package cmd

import (
	"io/fs"
	"syscall"
)

// ownerOf returns the owner and permission bits (with setuid, setgid and
// sticky) of fi, where the platform says.
func ownerOf(fi fs.FileInfo) (uid int, mode uint32, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), uint32(st.Mode) & 0o7777, true
}
