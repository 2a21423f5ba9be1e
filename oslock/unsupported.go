//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd)

package oslock

import (
	"context"
	"os"
)

// Without flock(2) there is nothing here to build an election on: every
// call answers ErrUnsupported (see doc.go, "Platform notes"). This file is
// the exact complement of the build list of the *_flock.go files.

func sysOpenDir(path string, opts DirOptions) (*Dir, error) { return nil, ErrUnsupported }

func (d *Dir) sysOpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return nil, ErrUnsupported
}
func (d *Dir) sysSub(name string, create bool, opts DirOptions) (*Dir, error) {
	return nil, ErrUnsupported
}
func (d *Dir) sysNames() ([]string, error)               { return nil, ErrUnsupported }
func (d *Dir) sysRemove(name string) error               { return ErrUnsupported }
func (d *Dir) sysRemoveDir(name string) error            { return ErrUnsupported }
func (d *Dir) sysLink(oldname, newname string) error     { return ErrUnsupported }
func (d *Dir) sysRename(oldname, newname string) error   { return ErrUnsupported }
func (d *Dir) sysLstat(name string) (FileID, int, error) { return FileID{}, 0, ErrUnsupported }
func (d *Dir) sysExists(name string) bool                { return false }
func (d *Dir) sysReadFile(name string, buf []byte) (int, error) {
	return 0, ErrUnsupported
}
func (d *Dir) sysResolvedPath(name string) string   { return d.path + "/" + name }
func (d *Dir) sysID() (FileID, error)               { return FileID{}, ErrUnsupported }
func (d *Dir) dup() (*Dir, error)                   { return nil, ErrUnsupported }
func sysIDOf(f *os.File) (FileID, error)            { return FileID{}, ErrUnsupported }
func sysDirOwner(path string) (int, error)          { return -1, ErrUnsupported }
func sysCheckFS(path string) error                  { return ErrUnsupported }
func sysLstatPath(path string) (FileID, int, error) { return FileID{}, 0, ErrUnsupported }

func (d *Dir) openBeacon(name string, owner bool) (*os.File, error) { return nil, ErrUnsupported }
func (d *Dir) makeBeacon(name string, perm os.FileMode) error       { return ErrUnsupported }
func (d *Dir) signalBeacon(name string, msg []byte) error           { return ErrUnsupported }
func waitHangup(ctx context.Context, f *os.File) error              { return ErrUnsupported }
func hungUp(f *os.File) bool                                        { return true }

func tryLock(fd int, exclusive bool) (bool, error) { return false, ErrUnsupported }
func unlock(fd int) error                          { return ErrUnsupported }

func sysLockTable() (map[FileID][]LockHolder, error)         { return nil, ErrUnsupported }
func sysFlockWaiters() (map[int]bool, error)                 { return nil, ErrUnsupported }
func sysStateOf(pid int) ProcState                           { return ProcUnknown }
func sysCmdline(pid int) []string                            { return nil }
func sysStatNumber(pid, n int) (uint64, bool)                { return 0, false }
func sysUIDOf(pid int) int                                   { return -1 }
func kill(pid int) error                                     { return ErrUnsupported }
func sysWaitGone(ctx context.Context, pid int) error         { return nil }
func sysOpenPidfd(pid int) (*os.File, error)                 { return nil, ErrUnsupported }
func sysWaitPidfd(ctx context.Context, pidfd *os.File) error { return ErrUnsupported }
