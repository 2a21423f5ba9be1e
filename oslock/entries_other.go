//go:build !linux

package oslock

func watchEntries(path string, writes bool) (*Watch, error) { return nil, ErrUnsupported }
