package cmd

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
)

// A socket error from the bus names no internal path and says what to do.
func TestBusErrorNoInternalPath(t *testing.T) {
	sock := "/home/u/.local/state/leaderrun/s.sock" // the name the bus gives its socket files
	for _, tc := range []struct {
		err  error
		code int
		want string
	}{
		{fmt.Errorf("bus: handshake: %w", &fs.PathError{Op: "read", Path: sock, Err: os.ErrDeadlineExceeded}),
			ExitSoftware, "leaderrun publish: cannot talk to the leader of s: i/o timeout; see who leads with leaderrun status s"},
		{fmt.Errorf("bus: handshake: %w", &fs.PathError{Op: "write", Path: sock, Err: syscall.EPIPE}),
			ExitSoftware, "leaderrun publish: cannot talk to the leader of s: broken pipe; see who leads with leaderrun status s"},
		{fmt.Errorf("bus: cannot connect to the leader of s in /proc/self/fd/14: %w", os.NewSyscallError("connect", syscall.EACCES)),
			ExitSoftware, "leaderrun publish: cannot talk to the leader of s: permission denied; see who leads with leaderrun status s"},
		{fmt.Errorf("bus: %w", os.NewSyscallError("socket", syscall.EMFILE)),
			ExitOSErr, "leaderrun: out of file descriptors (EMFILE"},
	} {
		err := busError("publish", "s", tc.err)
		if got := ExitCode(err); got != tc.code || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "/proc/") {
			t.Errorf("%v: exit %d %q, want %d %q", tc.err, got, err, tc.code, tc.want)
		}
	}
}
