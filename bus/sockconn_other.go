//go:build !linux

package bus

import "net"

// listenerAbove keeps ln: only Linux has the inotify instance whose
// teardown a dying leader's descriptors must not wait behind.
func listenerAbove(ln *net.UnixListener) sockListener { return netListener{ln} }
