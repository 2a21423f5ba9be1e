package etcd

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"

	"github.com/leaderrun/leaderrun/oslock"
)

// localID names this kernel (its boot id) and pid namespace: two requests
// with the same localID have pids of one namespace, whatever their host
// names say. "" if /proc cannot tell.
var localID = func() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(boot)) + "/" + ns
}()

// waitExit returns once pid has exited (it may be gone already), or with
// ctx's error.
func waitExit(ctx context.Context, pid int) error {
	pidfd, err := oslock.OpenPidfd(pid)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	if err != nil {
		return err
	}
	defer pidfd.Close()
	return oslock.WaitPidfd(ctx, pidfd)
}
