//go:build !linux

package oslock

import "os"

func watchPath(path string) (*Watch, error)       { return nil, ErrUnsupported }
func watchChild(dir, name string) (*Watch, error) { return nil, ErrUnsupported }
func (w *Watch) stop()                            {}
func sentinelFD() int                             { return -1 }
func above(f *os.File, min int) (*os.File, error) { return f, nil }
func reserveSlot()                                {}
