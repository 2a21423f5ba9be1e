package elect

import (
	"errors"
	"os"
	"testing"
	"time"
)

// A lock file removed after the holder's first look at its path and
// before the watch is set (the watch of a missing file fails) still ends
// the term with ErrLockLost; it was missed, and COMMAND kept running.
func TestLockRemovedWhileWatchArms(t *testing.T) {
	l, _ := testLocker(t)
	testBeforeWatch = func(lockPath string) {
		if err := os.Remove(lockPath); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { testBeforeWatch = nil })
	lead, err := l.Acquire(testCtx(t), "arm", Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Release()
	select {
	case <-lead.Done():
		if !errors.Is(lead.Err(), ErrLockLost) {
			t.Fatalf("term ended with %v, want ErrLockLost", lead.Err())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the term did not end within 5s of its lock file's removal")
	}
}
