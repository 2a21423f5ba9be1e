//go:build unix && !linux && !darwin && !freebsd

package oslock

func fsTypeName(fd int) string { return "" }
