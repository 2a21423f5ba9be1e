//go:build darwin || dragonfly || freebsd || illumos || netbsd || openbsd

package oslock

func (d *Dir) sysMove(oldname, newname string) error { return d.linkMove(oldname, newname) }
