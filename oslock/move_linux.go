package oslock

import "golang.org/x/sys/unix"

func (d *Dir) sysMove(oldname, newname string) error {
	err := unix.Renameat2(d.fd(), oldname, d.fd(), newname, unix.RENAME_NOREPLACE)
	switch err {
	case nil:
		return nil
	case unix.EINVAL, unix.ENOSYS:
		return d.linkMove(oldname, newname) // a filesystem without the flag
	}
	return d.pathErr("rename", newname, err)
}
