package proctest

import (
	"syscall"
	"testing"
)

// EndPID makes sure that pid, which the test caused to be started but did
// not start itself (a grandchild, a process a helper started), is killed
// and reaped when the test ends: the test binary is a child subreaper
// (package supervise makes it one), so such orphans come to it. A pid
// below 2 is a bug of the test: kill(2) would take -1 for every process
// there is, and 0 for this process group.
func EndPID(tb testing.TB, pid int) {
	tb.Helper()
	if pid < 2 {
		tb.Fatalf("EndPID(%d): not the pid of a process", pid)
	}
	tb.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	})
}
