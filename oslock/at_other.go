//go:build (darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd) && !darwin && !illumos

package oslock

import "golang.org/x/sys/unix"

func mkfifoat(d *Dir, name string, mode uint32) error {
	return unix.Mknodat(d.fd(), name, unix.S_IFIFO|mode, 0)
}

func linkat(d *Dir, oldname, newname string) error {
	return unix.Linkat(d.fd(), oldname, d.fd(), newname, 0)
}
