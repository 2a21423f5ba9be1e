//go:build !linux

package oslock

import "os"

func sysSetTag(f *os.File, key string, value []byte) {}

func sysTag(f *os.File, key string) ([]byte, bool) { return nil, false }
