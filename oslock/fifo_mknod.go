//go:build unix && !darwin && !ios

package oslock

import "golang.org/x/sys/unix"

func mkfifoat(d *Dir, name string, mode uint32) error {
	return unix.Mknodat(d.fd(), name, unix.S_IFIFO|mode, 0)
}
