package oslock

import "golang.org/x/sys/unix"

// mkfifoat goes by path here: x/sys has no mkfifoat for darwin. The lock
// directory was checked when opened; the beacon is then opened through
// its descriptor with O_NOFOLLOW, so a swapped path is refused, not used.
func mkfifoat(d *Dir, name string, mode uint32) error {
	return unix.Mkfifo(d.path+"/"+name, mode)
}

func linkat(d *Dir, oldname, newname string) error {
	return unix.Linkat(d.fd(), oldname, d.fd(), newname, 0)
}
