//go:build !linux

package oslock

import "os"

func (d *Dir) sysCreateUnnamed(perm os.FileMode) (*os.File, error) { return nil, ErrUnsupported }

func (d *Dir) sysLinkUnnamed(f *os.File, name string) error { return ErrUnsupported }
