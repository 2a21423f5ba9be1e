package elect

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

// TestHeadCodec: the head of the line's hint is read back as written, is
// void once the floor beside it is written alone (a steal's grant, an
// older leaderrun's) or the file is truncated or torn, and leaves the
// floor readable by a reader that knows only the floor.
func TestHeadCodec(t *testing.T) {
	b := appendHead(appendFloor(nil, 1234), 77)
	if len(b) != floorLen+headLen {
		t.Fatalf("length %d, want %d: %q", len(b), floorLen+headLen, b)
	}
	if h, ok := parseHead(b); !ok || h != 77 {
		t.Fatalf("parseHead %q: %d, %v", b, h, ok)
	}
	if f, ok := parseFloor(b[:floorLen]); !ok || f != 1234 {
		t.Fatalf("the floor before the hint reads %d, %v", f, ok)
	}
	other := appendFloor(nil, 1235)
	for name, bad := range map[string][]byte{
		"floor rewritten alone": append(slices.Clone(other), b[floorLen:]...),
		"truncated":             b[:len(b)-1],
		"empty":                 nil,
		"a digit torn":          append(slices.Clone(b[:floorLen+len(headPrefix)]), append([]byte("9"), b[floorLen+len(headPrefix)+1:]...)...),
		"no hint":               appendFloor(nil, 1234),
	} {
		if h, ok := parseHead(bad); ok {
			t.Errorf("%s: %q read as head %d", name, bad, h)
		}
	}
}

// TestHeadSparesLookups: a waiter that knew of many tickets ahead drops
// those below the head of the line without looking for them, keeps the
// ones whose beacons it holds alive (being put back), and ignores a hint
// above its own number.
func TestHeadSparesLookups(t *testing.T) {
	l, dir := testLocker(t)
	a := testAcquirer(t, l, "h")
	// Tickets 1 to 6 are all there (as files nobody locks, which only a
	// lookup would tell): the hint alone decides.
	for n := uint64(1); n <= 6; n++ {
		if err := os.WriteFile(filepath.Join(dir, "h"+queueSuffix, ticketName(n, false)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		a.known = append(a.known, entry{name: ticketName(n, false), seq: n})
	}
	all := slices.Clone(a.known)
	a.tk = &ticket{q: a.q, e: entry{name: ticketName(7, false), seq: 7}}
	if err := a.q.MakeBeacon(ticketName(2, false)+beaconSuffix, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := a.q.OpenBeacon(ticketName(2, false)+beaconSuffix, true) // its owner's end
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := a.beacon(ticketName(2, false)); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(dir, "h"+lockSuffix)
	for _, c := range []struct {
		head uint64
		want []uint64
	}{
		{5, []uint64{2, 5, 6}},
		{8, []uint64{1, 2, 3, 4, 5, 6}}, // above our number: not a hint
	} {
		a.known = slices.Clone(all)
		if err := os.WriteFile(lock, appendHead(appendFloor(nil, 99), c.head), 0o600); err != nil {
			t.Fatal(err)
		}
		ahead, err := a.aheadNow()
		if err != nil {
			t.Fatal(err)
		}
		var got []uint64
		for _, e := range ahead {
			got = append(got, e.seq)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("head %d: ahead %v, want %v", c.head, got, c.want)
		}
	}
}

// testAcquirer is a request for name in l's directory, with its queue
// open and no ticket, for tests of its parts; it is cleaned up at the
// test's end.
func testAcquirer(t *testing.T, l *Locker, name string) *acquirer {
	t.Helper()
	a := &acquirer{l: l, name: name, passed: map[string]bool{}, pids: map[string]int{}}
	var err error
	if a.dir, err = l.current(); err != nil {
		t.Fatal(err)
	}
	if err := a.openQueue(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.cleanupTest)
	return a
}

func (a *acquirer) cleanupTest() {
	a.closeBeacons()
	if a.lockF != nil {
		a.lockF.Close()
	}
	a.q.Close()
}

// TestHeadKeepsStoppedPlace: a waiter stopped in a long line is passed,
// the grants after it name it as the head of the line, and so the waiters
// far behind it, which knew of many tickets ahead, still keep it ahead of
// them: once it runs again it is served before them. The line ahead of the
// waiter that is served is one process at a time.
func TestHeadKeepsStoppedPlace(t *testing.T) {
	if testing.Short() {
		t.Skip("10 processes; skipped with -short")
	}
	l, dir := testLocker(t)
	ps := joinInOrder(t, l, dir, "hol", 10)
	stopped := ps[3]
	stopped.Signal(syscall.SIGSTOP)
	proctest.Eventually(t, "stopped", func() bool { return stateOf(t, l, "hol", stopped.PID()) == "stopped" })
	for i, p := range ps {
		if i == 3 {
			continue
		}
		p.Expect("leader")
		if h := holderPID(t, l, "hol"); h != p.PID() {
			t.Fatalf("contender %d leads but the holder is pid %d", i, h)
		}
		if i == 7 {
			// The ones behind (8 and 9) knew of 8 and 9 tickets ahead.
			stopped.Signal(syscall.SIGCONT)
			proctest.Eventually(t, "running", func() bool { return stateOf(t, l, "hol", stopped.PID()) == "running" })
			p.Send("release")
			stopped.Expect("leader")
			ps[8].Quiet(50 * time.Millisecond)
			stopped.Send("release")
			continue
		}
		p.Send("release")
	}
	f, err := os.Open(filepath.Join(dir, "hol"+lockSuffix))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if h, ok := readHead(f); !ok || h != 10 {
		t.Errorf("the last grant's head of the line: %d, %v; want 10", h, ok)
	}
}
