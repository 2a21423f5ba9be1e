package proctest

import "golang.org/x/sys/unix"

// ReapOrphans reaps, without waiting, every child of this process that
// has exited: the orphans a child subreaper (package supervise makes the test
// binary one) was handed. Call it only once every child the test waits
// for itself has been waited for.
func ReapOrphans() {
	for {
		var ws unix.WaitStatus
		if pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil); pid <= 0 || err != nil {
			return
		}
	}
}
