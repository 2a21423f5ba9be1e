//go:build !linux

package oslock

func watchMounts() (<-chan struct{}, func(), error) { return nil, nil, ErrUnsupported }
