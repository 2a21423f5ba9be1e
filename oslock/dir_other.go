//go:build !unix

package oslock

import "os"

// OpenDir returns ErrUnsupported on this platform.
func OpenDir(path string, opts DirOptions) (*Dir, error) { return nil, ErrUnsupported }

func (d *Dir) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return nil, ErrUnsupported
}
func (d *Dir) Sub(name string, create bool, opts DirOptions) (*Dir, error) {
	return nil, ErrUnsupported
}
func (d *Dir) Names() ([]string, error)               { return nil, ErrUnsupported }
func (d *Dir) Remove(name string) error               { return ErrUnsupported }
func (d *Dir) RemoveDir(name string) error            { return ErrUnsupported }
func (d *Dir) Link(oldname, newname string) error     { return ErrUnsupported }
func (d *Dir) Rename(oldname, newname string) error   { return ErrUnsupported }
func (d *Dir) Lstat(name string) (FileID, int, error) { return FileID{}, 0, ErrUnsupported }
func (d *Dir) ResolvedPath(name string) string        { return d.path + "/" + name }
func IDOf(f *os.File) (FileID, error)                 { return FileID{}, ErrUnsupported }
func DirOwner(path string) (int, error)               { return -1, ErrUnsupported }
func CheckFS(path string) error                       { return ErrUnsupported }

func (d *Dir) openBeacon(name string, owner bool) (*os.File, error) { return nil, ErrUnsupported }
func (d *Dir) makeBeacon(name string, perm os.FileMode) error       { return ErrUnsupported }
func (d *Dir) signalBeacon(name string, msg []byte) error           { return ErrUnsupported }
func (d *Dir) dup() (*Dir, error)                                   { return nil, ErrUnsupported }
func (d *Dir) ID() (FileID, error)                                  { return FileID{}, ErrUnsupported }
func LstatPath(path string) (FileID, int, error)                    { return FileID{}, 0, ErrUnsupported }
