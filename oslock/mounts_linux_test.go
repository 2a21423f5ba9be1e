package oslock

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// A mount over a directory is told by WatchMounts (it sends no inotify
// event).
func TestWatchMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	c, stop, err := WatchMounts()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// The poller may report the file once as it is registered.
	select {
	case <-c:
	case <-time.After(200 * time.Millisecond):
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "none", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount here: %v: %s", err, out)
	}
	defer exec.Command("umount", "-l", dir).Run()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s of a mount")
	}
	exec.Command("umount", "-l", dir).Run()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s of a lazy unmount")
	}
}
