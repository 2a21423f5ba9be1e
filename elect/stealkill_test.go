package elect

import "testing"

// TestKillSparesSteppedBack: a stealer's KillAfter kills only a deposed
// holder that is still in the way, never one that wrote its grant, saw
// the steal and stepped back, and so waits in line (its ticket is alive,
// but not granted).
func TestKillSparesSteppedBack(t *testing.T) {
	l, dir := testLocker(t)
	lead, err := l.Acquire(testCtx(t), "k", Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Release()
	p := joinInOrder(t, l, dir, "k", 1)[0]
	a := &acquirer{l: l, name: "k", passed: map[string]bool{}, pids: map[string]int{}}
	if a.dir, err = l.current(); err != nil {
		t.Fatal(err)
	}
	if err := a.openQueue(); err != nil {
		t.Fatal(err)
	}
	defer a.cleanupTest()
	if err := a.openLock(); err != nil {
		t.Fatal(err)
	}
	queue, err := listQueue(a.q)
	if err != nil || len(queue) != 2 {
		t.Fatalf("queue %v, %v: want the holder and the waiter", queue, err)
	}
	waiter := queue[1].name
	a.deposed = map[string]bool{waiter: true}
	a.pids[waiter] = p.PID()
	if err := a.killHolders(); err != nil {
		t.Fatal(err)
	}
	lead.Release()
	p.Expect("leader")
}
