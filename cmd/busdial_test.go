package cmd

import (
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

// A socket error from the bus names no internal path and says what to do.
func TestBusErrorNoInternalPath(t *testing.T) {
	addr := &net.UnixAddr{Name: "/proc/self/fd/14/s.sock", Net: "unix"}
	for _, tc := range []struct {
		err  error
		code int
		want string
	}{
		{fmt.Errorf("bus: handshake: %w", &net.OpError{Op: "read", Net: "unix", Addr: addr, Err: os.ErrDeadlineExceeded}),
			ExitSoftware, "leaderrun publish: cannot talk to the leader of s: i/o timeout; see who leads with leaderrun status s"},
		{fmt.Errorf("bus: handshake: %w", &net.OpError{Op: "write", Net: "unix", Addr: addr, Err: os.NewSyscallError("write", syscall.EPIPE)}),
			ExitSoftware, "leaderrun publish: cannot talk to the leader of s: broken pipe; see who leads with leaderrun status s"},
		{fmt.Errorf("bus: %w", &net.OpError{Op: "dial", Net: "unix", Addr: addr, Err: os.NewSyscallError("socket", syscall.EMFILE)}),
			ExitOSErr, "leaderrun: out of file descriptors (EMFILE"},
	} {
		err := busError("publish", "s", tc.err)
		if got := ExitCode(err); got != tc.code || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "/proc/") {
			t.Errorf("%v: exit %d %q, want %d %q", tc.err, got, err, tc.code, tc.want)
		}
	}
}
