package elect

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/leaderrun/leaderrun/oslock"
)

// TestInboxReused: a released holder puts its inbox, beacon and ticket
// file aside, and the next request to join takes them instead of making new
// ones; Prune removes what is put aside, and a spare name that holds
// anything but what belongs there is removed and a new file made.
func TestInboxReused(t *testing.T) {
	l, dir := testLocker(t)
	q := filepath.Join(dir, "s"+queueSuffix)
	inode := func(name string) uint64 {
		t.Helper()
		fi, err := os.Lstat(filepath.Join(q, name))
		if err != nil {
			t.Fatal(err)
		}
		wantFIFO := strings.HasSuffix(name, inboxSuffix) || strings.HasSuffix(name, beaconSuffix) || !strings.HasPrefix(name, sparePrefix+"t") && strings.HasPrefix(name, sparePrefix)
		if isFIFO := fi.Mode()&os.ModeNamedPipe != 0; isFIFO != wantFIFO {
			t.Fatalf("%s is %v", name, fi.Mode())
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	lead, err := l.Acquire(testCtx(t), "s", Request{})
	if err != nil {
		t.Fatal(err)
	}
	first := inode(ticketName(1, false) + inboxSuffix)
	firstTicket := inode(ticketName(1, false))
	firstBeacon := inode(ticketName(1, false) + beaconSuffix)
	lead.Release()
	if got := inode(spareBeaconName(1)); got != firstBeacon {
		t.Fatalf("the spare beacon is inode %d; want the released beacon's, %d", got, firstBeacon)
	}
	if got := inode(spareName(1)); got != first {
		t.Fatalf("the spare is inode %d; want the released inbox's, %d", got, first)
	}
	if got := inode(spareTicketName(1)); got != firstTicket {
		t.Fatalf("the spare ticket is inode %d; want the released ticket's, %d", got, firstTicket)
	}
	lead, err = l.Acquire(testCtx(t), "s", Request{})
	if err != nil {
		t.Fatal(err)
	}
	if got := inode(ticketName(2, false) + inboxSuffix); got != first {
		t.Errorf("the second request's inbox is inode %d; want the spare, %d", got, first)
	}
	if got := inode(ticketName(2, false)); got != firstTicket {
		t.Errorf("the second request's ticket is inode %d; want the spare, %d", got, firstTicket)
	}
	if got := inode(ticketName(2, false) + beaconSuffix); got != firstBeacon {
		t.Errorf("the second request's beacon is inode %d; want the spare, %d", got, firstBeacon)
	}
	if s, err := l.Query(testCtx(t), "s"); err != nil || len(s.Held) != 1 || s.Held[0].PID != os.Getpid() || s.Held[0].Epoch != lead.Epoch() {
		t.Errorf("Query of the holder on a reused ticket: %+v, %v", s, err)
	}
	if _, err := os.Lstat(filepath.Join(q, spareName(1))); err == nil {
		t.Errorf("the spare is still there once taken")
	}
	lead.Release()
	// Planted: a regular file where the next request looks first for an
	// inbox, a FIFO where it looks for a ticket.
	os.Remove(filepath.Join(q, spareName(2)))
	if err := os.WriteFile(filepath.Join(q, spareName(2)), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(q, spareTicketName(2)))
	if err := syscall.Mkfifo(filepath.Join(q, spareTicketName(2)), 0o600); err != nil {
		t.Fatal(err)
	}
	lead, err = l.Acquire(testCtx(t), "s", Request{})
	if err != nil {
		t.Fatalf("with a regular file as the spare: %v", err)
	}
	inode(ticketName(3, false) + inboxSuffix)
	inode(ticketName(3, false))
	for _, n := range []string{spareName(2), spareTicketName(2)} {
		if _, err := os.Lstat(filepath.Join(q, n)); err == nil {
			t.Errorf("the planted %s is still there", n)
		}
	}
	lead.Release()
	if err := l.Prune(testCtx(t), "s"); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(q); len(left) != 0 {
		t.Errorf("after Prune the queue holds %v", left)
	}
}

// TestSpareBeaconHeld: a released beacon that a waiter still holds open is
// not reused (the waiter would take it for its old owner's, alive again):
// the next request makes a new one.
func TestSpareBeaconHeld(t *testing.T) {
	l, dir := testLocker(t)
	q := filepath.Join(dir, "s"+queueSuffix)
	lead, err := l.Acquire(testCtx(t), "s", Request{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := l.current()
	if err != nil {
		t.Fatal(err)
	}
	qd, err := d.Sub("s"+queueSuffix, false, defaultSubOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer qd.Close()
	held, err := openBeaconOf(qd, ticketName(1, false)+beaconSuffix) // as a waiter behind it
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	lead.Release()
	if _, err := os.Lstat(filepath.Join(q, spareBeaconName(1))); err != nil {
		t.Fatalf("the released beacon is not put aside: %v", err)
	}
	lead, err = l.Acquire(testCtx(t), "s", Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Release()
	var heldSt, newSt syscall.Stat_t
	syscall.Fstat(int(held.Fd()), &heldSt)
	if err := syscall.Lstat(filepath.Join(q, ticketName(2, false)+beaconSuffix), &newSt); err != nil {
		t.Fatal(err)
	}
	if newSt.Ino == heldSt.Ino {
		t.Fatalf("a beacon still held by a waiter was reused")
	}
	if !oslock.HungUp(held) {
		t.Errorf("the held beacon of the released ticket does not read as hung up")
	}
}
