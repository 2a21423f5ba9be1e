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
	h.expect("leader")
	s1 := spawn(t, dir, "ss", "T_STEAL=1")
	h.expect("lost " + ErrStolen.Error())
	s2 := spawn(t, dir, "ss", "T_STEAL=1", "T_KILLAFTER=50ms")
	// s2 queues behind s1, which waits for h to let go; s2's grace
	// period ends meanwhile.
	s2.quiet(300 * time.Millisecond)
	h.signal(syscall.SIGKILL)
	h.wait()
	s1.expect("leader")
	s2.quiet(50 * time.Millisecond)
	s1.say("release")
	s1.expect("released")
	s2.expect("leader")
}
