package elect

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/leaderrun/leaderrun/oslock"
)

// Spare inboxes. Making a FIFO allocates an inode, which is most of what a
// request's join costs on a filesystem that has seen many come and go
// (ext4 skips recently freed inodes one by one). An inbox is read by its
// owner only (a nudger or stealer opens it for a moment, to write), so
// once its owner has closed it nobody holds it: a releasing holder puts
// its inbox aside under a spare name instead of removing it, and the next
// request to join takes it as its own, renamed, in place of a new FIFO.
// What a writer left in it is a nudge (look again, always safe) or a
// steal notice for another epoch (ignored). A beacon is reused the same
// way, but only once nobody holds it open for reading: a waiter that
// still held it would take it, reused, for its old owner's, alive again.
// One who opens a beacon by name checks afterwards that the name still
// refers to it (openBeaconOf), so that a beacon opened a moment before it
// was put aside is not taken for its old owner's either.
//
// A ticket's file is reused the same way. Readers open a ticket by its
// name for a moment (probe, readRecord), and check afterwards that the
// name still refers to the file they opened: one that was put aside, and
// taken by the next request, is then the ticket gone that it is.
//
// There are at most spareSlots spares of each in a queue; Prune removes
// them.
// They are not kept in a group-shared directory, where a spare could be
// another member's.

const (
	sparePrefix = ".spare-"
	spareSlots  = 4
)

// spareName is the name of an inbox's slot, spareBeaconName a beacon's,
// spareTicketName a ticket file's.
func spareName(slot uint64) string { return spareSlot("m", slot) }

func spareBeaconName(slot uint64) string { return spareSlot("w", slot) }

func spareTicketName(slot uint64) string { return spareSlot("t", slot) }

func spareSlot(kind string, slot uint64) string {
	return sparePrefix + kind + strconv.FormatUint(slot%spareSlots, 10)
}

// isSpare reports whether name is a spare inbox's.
func isSpare(name string) bool { return strings.HasPrefix(name, sparePrefix) }

// takeSpare renames a spare FIFO of q (slot names its slots) to tmp and
// opens it as its owner, or returns nil when there is none. One that is
// not a FIFO, or that anyone still holds open for reading (a waiter that
// has not yet closed the beacon it slept on), is removed instead, and a
// new one made. Only we can put anything there: spares are kept in
// private queue directories only. The slots are tried from the one the
// request just ahead of seq left its files in.
func takeSpare(q *oslock.Dir, tmp string, slot func(uint64) string, seq uint64) *os.File {
	for i := range uint64(spareSlots) {
		if q.Rename(slot(seq-1+i), tmp) != nil {
			continue
		}
		// Opening it for writing without blocking fails when it has no
		// reader: nobody holds it. Nothing is written.
		if errors.Is(q.SignalBeacon(tmp, nil), fs.ErrNotExist) {
			if f, err := q.OpenBeacon(tmp, true); err == nil {
				return f
			}
		}
		q.Remove(tmp)
		return nil
	}
	return nil
}

// openBeaconOf opens the beacon name (a ticket's, with its suffix) to
// sleep on, checking afterwards that the name still refers to what was
// opened: a beacon put aside since, and taken by a later request, is
// reported gone (fs.ErrNotExist), as its ticket is.
func openBeaconOf(q *oslock.Dir, name string) (*os.File, error) {
	f, err := q.OpenBeacon(name, false)
	if err != nil {
		return nil, err
	}
	if !sameFile(q, name, f) {
		f.Close()
		return nil, fs.ErrNotExist
	}
	return f, nil
}

// takeSpareTicket is takeSpare for a ticket's file: a regular file of at
// most maxSpareTicket bytes, returned with its size. It is not truncated
// (ext4 flushes a file truncated to nothing when it is closed): the
// record written into it is padded to that size (see ticket.write).
func takeSpareTicket(q *oslock.Dir, tmp string, seq uint64) (*os.File, int) {
	for i := range uint64(spareSlots) {
		if q.Rename(spareTicketName(seq-1+i), tmp) != nil {
			continue
		}
		f, err := q.OpenFile(tmp, os.O_RDWR, 0)
		if err == nil {
			if fi, err := f.Stat(); err == nil && fi.Size() <= maxSpareTicket {
				return f, int(fi.Size())
			}
			f.Close()
		}
		q.Remove(tmp)
		return nil, 0
	}
	return nil, 0
}

// maxSpareTicket bounds the spare ticket files taken: a record is padded
// to the size of the file it is written into.
const maxSpareTicket = 1024

// putSpare puts name, a FIFO of the released ticket e that its owner has
// closed, aside in its slot for the next request to join (or removes it,
// where spares are not kept).
func putSpare(q *oslock.Dir, name, slot string, keep bool) {
	if !keep || q.Rename(name, slot) != nil {
		q.Remove(name)
	}
}

// releaseTicket closes the released ticket t's file and puts it aside
// (see putSpare), or removes its name (if it is still ours) where spares
// are not kept. The file is closed first, so that nobody finds a spare
// locked; until it is renamed, a reader that meets its name sees a dead
// ticket, as it is.
func (t *ticket) releaseTicket() {
	if !t.spare {
		t.unlink()
		return
	}
	ours := t.present()
	t.f.Close()
	if ours && t.q.Rename(t.e.name, spareTicketName(t.e.seq)) != nil {
		t.q.Remove(t.e.name)
	}
}
