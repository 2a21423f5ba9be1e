package oslock

import "golang.org/x/sys/unix"

func mkfifoat(d *Dir, name string, mode uint32) error {
	return unix.Mknodat(d.fd(), name, unix.S_IFIFO|mode, 0)
}

// linkat goes by path here: x/sys has no linkat for illumos. A directory
// put at the path since it was checked holds no file named oldname of
// ours (tickets are made under a random temporary name first), so the
// link fails there rather than publishing anything in it.
func linkat(d *Dir, oldname, newname string) error {
	return unix.Link(d.path+"/"+oldname, d.path+"/"+newname)
}
