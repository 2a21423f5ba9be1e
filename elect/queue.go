package elect

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/oslock"
)

// The queue of a name is the directory <name>.queue. Each request holds one
// ticket file there, flock'ed by its owner for as long as the request lives
// (waiting, then holding). A ticket appears under its final name only once
// it is locked, so a ticket whose lock can be taken belongs to a dead
// process and may be removed by whoever finds it. Ticket numbers come from
// the state file's counter and are never reused.
//
// Names: "t" + 20 digits for ordinary requests; "s" + 20 digits for steals,
// which sort before every "t" ticket. Anything else in the directory is
// ignored (and shown by Query as nothing).
const (
	ticketPrefix = 't'
	stealPrefix  = 's'
)

// ticketName is a ticket's file name.
func ticketName(seq uint64, steal bool) string {
	p := ticketPrefix
	if steal {
		p = stealPrefix
	}
	return fmt.Sprintf("%c%020d", p, seq)
}

// entry is a ticket seen in a listing.
type entry struct {
	name  string
	seq   uint64
	steal bool
}

// parseTicket decodes a ticket file name; ok is false for anything else.
func parseTicket(name string) (entry, bool) {
	if len(name) != 21 || (name[0] != ticketPrefix && name[0] != stealPrefix) {
		return entry{}, false
	}
	for i := 1; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return entry{}, false
		}
	}
	seq, err := strconv.ParseUint(name[1:], 10, 64)
	if err != nil {
		return entry{}, false
	}
	return entry{name: name, seq: seq, steal: name[0] == stealPrefix}, true
}

// before orders the queue: steals first, then by number.
func before(a, b entry) bool {
	if a.steal != b.steal {
		return a.steal
	}
	return a.seq < b.seq
}

// listQueue returns the tickets in queue order.
func listQueue(q *oslock.Dir) ([]entry, error) {
	names, err := q.Names()
	if err != nil {
		return nil, err
	}
	out := make([]entry, 0, len(names))
	for _, n := range names {
		if e, ok := parseTicket(n); ok {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b entry) int {
		switch {
		case before(a, b):
			return -1
		case before(b, a):
			return 1
		}
		return 0
	})
	return out, nil
}

// lastTicket is the highest ticket number in q (0 if none or unreadable).
func lastTicket(q *oslock.Dir) uint64 {
	queue, _ := listQueue(q)
	var last uint64
	for _, e := range queue {
		last = max(last, e.seq)
	}
	return last
}

// record is a ticket's content, written by its owner only. It is
// informational: the lock on the ticket, not its content, is what counts.
type record struct {
	PID     int       `json:"pid"`
	Mode    Mode      `json:"mode"`
	Since   time.Time `json:"since"`
	Command []string  `json:"command,omitempty"`
	Steal   bool      `json:"steal,omitempty"`
	// Epoch and Granted are set once the request holds the lock.
	Epoch   uint64    `json:"epoch,omitempty"`
	Granted time.Time `json:"granted,omitzero"`
	// Deposed is set by a holder whose term a stealer ended; it keeps
	// the lock until it releases it.
	Deposed bool `json:"deposed,omitempty"`
	// Polling is set while the request waits by the fallback poll.
	Polling bool `json:"polling,omitempty"`
	// Labels are the request's, for Query and Elector.Yield.
	Labels []string `json:"labels,omitempty"`
}

// maxRecord bounds what is read of a ticket.
const maxRecord = 16 << 10

func decodeRecord(b []byte) (record, error) {
	r, err := parseRecord(b)
	if err != nil {
		return record{}, err
	}
	if r.PID <= 0 {
		return record{}, errors.New("no pid")
	}
	return r, nil
}

// Each ticket has a beacon beside it, <ticket>.w: a FIFO that the owner
// holds open (read-write, flocked) for as long as the request lives. A
// successor sleeps until the beacon hangs up, which the kernel makes happen
// when the owner closes it or dies; no inotify instance is involved. The
// beacon is linked under its name before the ticket is, so a listed ticket
// always has one. Beside them is <ticket>.m, the inbox: a FIFO that only
// its owner reads, where a stealer writes its notice ("S<epoch>\n") that it
// deposes the holder of that epoch.
// ticket is one's own ticket.
type ticket struct {
	q      *oslock.Dir
	e      entry
	f      *os.File
	id     oslock.FileID
	rec    record
	size   int      // of the record as last written
	beacon *os.File // the owner's read-write ends
	inbox  *os.File
}

// publish creates the locked ticket e in q with its beacon: each is made
// under a temporary name, locked, and then linked under its final name,
// so that neither is ever visible unlocked.
func publish(q *oslock.Dir, e entry, rec record) (*ticket, error) {
	p, err := prepare(q, rec)
	if err != nil {
		return nil, err
	}
	defer p.discard()
	return p.link(e)
}

// draft is a ticket made but not yet named: its inbox, beacon and
// record file, each locked under a temporary name. A joiner makes it
// before it takes the state file's lock, so that under the lock it only
// draws its number and links three names (see acquirer.join): a process
// stopped while it holds that lock stalls every join and grant of the name.
type draft struct {
	q                   *oslock.Dir
	t                   *ticket
	inbox, beacon, file string // the temporary names
}

// prepare makes the files of a ticket for rec in q.
func prepare(q *oslock.Dir, rec record) (*draft, error) {
	p := &draft{q: q, t: &ticket{q: q, rec: rec}}
	var err error
	if p.t.inbox, p.inbox, err = makeBeacon(q); err == nil {
		if p.t.beacon, p.beacon, err = makeBeacon(q); err == nil {
			p.t.f, p.file, err = makeTicket(p.t)
		}
	}
	if err != nil {
		p.discard()
		return nil, err
	}
	return p, nil
}

// link gives p's files the names of ticket e, the ticket's last, so that a
// listed ticket always has its beacon and inbox, and returns the ticket,
// which p no longer owns.
func (p *draft) link(e entry) (*ticket, error) {
	names := [...]struct{ tmp, final string }{
		{p.inbox, e.name + inboxSuffix}, {p.beacon, e.name + beaconSuffix}, {p.file, e.name},
	}
	for i, n := range names {
		if err := linkFinal(p.q, n.tmp, n.final); err != nil {
			for _, linked := range names[:i] {
				p.q.Remove(linked.final)
			}
			return nil, err
		}
	}
	t := p.t
	t.e, p.t = e, nil
	return t, nil
}

// discard removes p's temporary names, and closes its files unless link
// handed them on.
func (p *draft) discard() {
	for _, n := range []string{p.inbox, p.beacon, p.file} {
		if n != "" {
			p.q.Remove(n)
		}
	}
	if p.t != nil {
		for _, f := range []*os.File{p.t.inbox, p.t.beacon, p.t.f} {
			if f != nil {
				f.Close()
			}
		}
	}
}

func retry(once func() (*os.File, string, bool, error)) (*os.File, string, error) {
	for attempt := 0; ; attempt++ {
		f, tmp, again, err := once()
		if err == nil || !again || attempt == 10 {
			return f, tmp, err
		}
	}
}

func tmpName() string {
	var rnd [8]byte
	rand.Read(rnd[:])
	return tmpPrefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(rnd[:])
}

// renewBeacon gives the ticket a new beacon under the same name and closes
// the old one, so that whoever sleeps on it wakes and looks again: for a
// grant that steps back, which waiters may have taken for the holder.
func (t *ticket) renewBeacon() error {
	tmp := tmpName()
	if err := t.q.MakeBeacon(tmp, 0o600); err != nil {
		return err
	}
	defer t.q.Remove(tmp)
	f, err := t.q.OpenBeacon(tmp, true)
	if err != nil {
		return err
	}
	if ok, err := oslock.TryLock(f, true); err != nil || !ok {
		f.Close()
		return errors.Join(err, fs.ErrExist)
	}
	if err := t.q.Rename(tmp, t.e.name+beaconSuffix); err != nil {
		f.Close()
		return err
	}
	t.beacon.Close()
	t.beacon = f
	return nil
}

// makeBeacon makes a FIFO, a beacon or an inbox, under a temporary name,
// open read-write and locked.
func makeBeacon(q *oslock.Dir) (*os.File, string, error) {
	return retry(func() (*os.File, string, bool, error) {
		tmp := tmpName()
		if err := q.MakeBeacon(tmp, 0o600); err != nil {
			return nil, "", false, err
		}
		f, err := q.OpenBeacon(tmp, true)
		if err != nil {
			q.Remove(tmp)
			return nil, "", errors.Is(err, fs.ErrNotExist), err
		}
		if again, err := lockFresh(q, f, tmp); err != nil {
			return nil, "", again, err
		}
		return f, tmp, false, nil
	})
}

// makeTicket makes t's record file under a temporary name, locked, with
// t's record in it.
func makeTicket(t *ticket) (*os.File, string, error) {
	return retry(func() (*os.File, string, bool, error) {
		tmp := tmpName()
		f, err := t.q.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, "", false, err
		}
		if again, err := lockFresh(t.q, f, tmp); err != nil {
			return nil, "", again, err
		}
		t.f = f
		if err = t.write(); err == nil {
			t.id, err = oslock.IDOf(f)
		}
		if err != nil {
			f.Close()
			t.q.Remove(tmp)
			return nil, "", false, err
		}
		return f, tmp, false, nil
	})
}

// lockFresh locks f, just made under the temporary name tmp. A cleaner
// (prune) that probed it first may have taken it for a dead process's
// and removed it: then it is given up, with again set, and the caller
// makes another.
func lockFresh(q *oslock.Dir, f *os.File, tmp string) (again bool, err error) {
	ok, err := oslock.TryLock(f, true)
	if err == nil && ok {
		id, err1 := oslock.IDOf(f)
		cur, _, err2 := q.Lstat(tmp)
		if err1 == nil && err2 == nil && cur == id {
			return false, nil
		}
	}
	f.Close()
	q.Remove(tmp)
	if err != nil {
		return false, err
	}
	return true, fs.ErrExist
}

// linkFinal gives the temporary file tmp its final name.
func linkFinal(q *oslock.Dir, tmp, name string) error {
	err := q.Link(tmp, name)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: %s/%s exists but was not handed out by the ticket counter; nothing was changed. If no process is using this lock, remove the queue directory %s",
			ErrCorrupt, q.Path(), name, q.Path())
	}
	return err
}

// write stores the record. It never shrinks the file (the rest is padded
// with spaces, which JSON ignores), so a reader meets at worst a write
// half-done, never a truncation.
func (t *ticket) write() error {
	b, err := appendRecord(make([]byte, 0, max(t.size, 256)), &t.rec)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if pad := t.size - len(b); pad > 0 {
		b = append(b, bytes.Repeat([]byte{' '}, pad)...)
	}
	t.size = len(b)
	_, err = t.f.WriteAt(b, 0)
	return err
}

// present reports whether the ticket's name still refers to our file.
func (t *ticket) present() bool {
	id, _, err := t.q.Lstat(t.e.name)
	return err == nil && id == t.id
}

// unpublish removes the ticket's names (if they are still ours) and closes
// the ticket file; the beacon is closed by close, last, so that whoever
// sleeps on it wakes once everything else of the request is gone.
func (t *ticket) unpublish() {
	t.unlink()
	t.unlinkFIFOs()
}

// unlink removes the ticket's name (if it is still ours) and closes the
// ticket file, leaving the beacon and inbox.
func (t *ticket) unlink() {
	t.unname()
	oslock.Drop(t.f)
}

// unname removes the ticket's name if it is still ours, leaving the file
// open (and locked) until the caller closes it.
func (t *ticket) unname() {
	if t.present() {
		t.q.Remove(t.e.name)
	}
}

// unlinkFIFOs removes the names of the ticket's beacon and inbox.
func (t *ticket) unlinkFIFOs() {
	t.q.Remove(t.e.name + inboxSuffix)
	t.q.Remove(t.e.name + beaconSuffix)
}

// drop removes the ticket and closes everything of it.
func (t *ticket) drop() {
	t.unpublish()
	t.inbox.Close()
	t.beacon.Close()
}

// probe reports whether the ticket e is owned by a live process. A dead
// owner's ticket is removed on the way, with its beacon: whoever finds it
// cleans it.
func probe(q *oslock.Dir, e entry) (alive bool, err error) {
	f, err := q.OpenFile(e.name, os.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	defer f.Close()
	ok, err := oslock.TryLock(f, false)
	if err != nil || !ok {
		return !ok, err
	}
	// Nobody holds it: its owner died. The name is unique for ever, but
	// check that it is still this file before removing it.
	if id, err := oslock.IDOf(f); err == nil {
		if cur, _, err := q.Lstat(e.name); err == nil && cur == id {
			// Its FIFOs go too, even if a thread of the dying owner
			// still has them open: their names are never used again.
			q.Remove(e.name)
			q.Remove(e.name + inboxSuffix)
			q.Remove(e.name + beaconSuffix)
		}
	}
	return false, nil
}

// removeDeadBeacon removes the beacon (or temporary FIFO) name when nobody
// holds its lock.
func removeDeadBeacon(q *oslock.Dir, name string) {
	f, err := q.OpenBeacon(name, false)
	if err != nil {
		return
	}
	defer f.Close()
	if ok, err := oslock.TryLock(f, false); err != nil || !ok {
		return
	}
	if id, err := oslock.IDOf(f); err == nil {
		if cur, _, err := q.Lstat(name); err == nil && cur == id {
			q.Remove(name)
		}
	}
}

// readRecord reads a ticket's content without locking it.
func readRecord(q *oslock.Dir, name string) (record, error) {
	// Most records are a few hundred bytes: a larger buffer only for a
	// larger one. Each read opens the ticket anew (an open, a stat, a
	// read and a close: no descriptor is kept).
	var small [1024]byte
	b := small[:]
	// The owner rewrites its record in place (once granted, once
	// deposed), so a read may meet a write half-done: read again.
	for attempt := 0; ; attempt++ {
		n, err := q.ReadFile(name, b)
		if err != nil {
			return record{}, err
		}
		if n == len(b) && len(b) < maxRecord {
			b = make([]byte, maxRecord)
			if n, err = q.ReadFile(name, b); err != nil {
				return record{}, err
			}
		}
		r, err := decodeRecord(b[:n])
		if err == nil || attempt == 3 {
			return r, err
		}
		runtime.Gosched()
	}
}

// prune removes the tickets, beacons and temporary files of dead processes
// from q.
func prune(ctx context.Context, d *oslock.Dir, name string, q *oslock.Dir) error {
	names, err := q.Names()
	if err != nil {
		return err
	}
	defer unmarkSteal(d, name, q)
	for _, n := range names {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if e, ok := parseTicket(n); ok {
			if _, err := probe(q, e); err != nil {
				return err
			}
			continue
		}
		base, isBeacon := strings.CutSuffix(n, beaconSuffix)
		if !isBeacon {
			base, isBeacon = strings.CutSuffix(n, inboxSuffix)
		}
		if _, ok := parseTicket(base); ok && isBeacon {
			if _, _, err := q.Lstat(base); errors.Is(err, fs.ErrNotExist) {
				removeDeadBeacon(q, n)
			}
		} else if strings.HasPrefix(n, tmpPrefix) {
			if _, err := probe(q, entry{name: n}); err != nil {
				removeDeadBeacon(q, n) // a half-made beacon
			}
		}
	}
	return nil
}
