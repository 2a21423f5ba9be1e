package elect

import (
	"syscall"
	"testing"
	"time"
)

// A stealer whose KillAfter runs out while it still waits behind an
// earlier stealer has evicted nobody: it must keep waiting, not crash
// (found by TestChaos: killHolders used the lock file before it was open).
func TestStealBehindStealerKillAfter(t *testing.T) {
	_, dir := testLocker(t)
	h := spawn(t, dir, "ss", "T_HOLD=1")
	h.Expect("leader")
	s1 := spawn(t, dir, "ss", "T_STEAL=1")
	h.Expect("lost " + ErrStolen.Error())
	s2 := spawn(t, dir, "ss", "T_STEAL=1", "T_KILLAFTER=50ms")
	// s2 queues behind s1, which waits for h to let go; s2's grace
	// period ends meanwhile.
	s2.Quiet(300 * time.Millisecond)
	h.Signal(syscall.SIGKILL)
	h.Wait()
	s1.Expect("leader")
	s2.Quiet(50 * time.Millisecond)
	s1.Send("release")
	s1.Expect("released")
	s2.Expect("leader")
}
