package bus

import "errors"

// The bus's Unix stream sockets. On unix they are raw non-blocking
// descriptors in an *os.File (sock_unix.go), which the runtime's poller
// serves as it serves package net's: reads and writes park the goroutine,
// deadlines work and Close unblocks them. Package net is not linked there,
// and with it goes the cgo half of its resolver, which every start of a
// cgo build paid for (issue 24). Elsewhere (sock_other.go) they are package
// net's.
//
// Both give a sockConn with Read, Write, Close, the deadlines, CloseWrite
// and SyscallConn (for the peer's credentials), and a sockListener whose
// accept fails with errSockClosed once Close has been called.

// errSockClosed is accept's error after the listener's Close.
var errSockClosed = errors.New("bus: socket closed")

// listenBacklog is the listen(2) backlog; the kernel caps it at its own
// limit (net.core.somaxconn on Linux), as it does package net's.
const listenBacklog = 4096
