package elect

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
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
	tmpPrefix    = ".tmp-"
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
}

// maxRecord bounds what is read of a ticket.
const maxRecord = 16 << 10

func decodeRecord(b []byte) (record, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return record{}, err
	}
	if r.PID <= 0 {
		return record{}, errors.New("no pid")
	}
	return r, nil
}

// ticket is one's own ticket.
type ticket struct {
	q   *oslock.Dir
	e   entry
	f   *os.File
	id  oslock.FileID
	rec record
}

// publish creates the locked ticket e in q: a temporary file is created,
// locked and written, then linked under its final name, so that the
// ticket is never visible unlocked.
func publish(q *oslock.Dir, e entry, rec record) (*ticket, error) {
	for attempt := 0; ; attempt++ {
		t, retry, err := publishOnce(q, e, rec)
		if err == nil || !retry || attempt == 10 {
			return t, err
		}
	}
}

// publishOnce makes one attempt; retry is set when a cleaner raced with it
// over the temporary file.
func publishOnce(q *oslock.Dir, e entry, rec record) (t *ticket, retry bool, err error) {
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := tmpPrefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(rnd[:])
	f, err := q.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false, err
	}
	defer func() {
		q.Remove(tmp)
		if err != nil {
			f.Close()
		}
	}()
	t = &ticket{q: q, e: e, f: f, rec: rec}
	ok, err := oslock.TryLock(f, true)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		return nil, true, fs.ErrExist // a cleaner is probing the fresh file
	}
	if err := t.write(); err != nil {
		return nil, false, err
	}
	if t.id, err = oslock.IDOf(f); err != nil {
		return nil, false, err
	}
	if err := q.Link(tmp, e.name); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, true, err // a cleaner removed the temporary file
		}
		if errors.Is(err, fs.ErrExist) {
			return nil, false, fmt.Errorf("%w: %s/%s exists but was not handed out by the ticket counter; nothing was changed. If no process is using this lock, remove the queue directory %s",
				ErrCorrupt, q.Path(), e.name, q.Path())
		}
		return nil, false, err
	}
	return t, false, nil
}

func (t *ticket) write() error {
	b, err := json.Marshal(t.rec)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := t.f.WriteAt(b, 0); err != nil {
		return err
	}
	return t.f.Truncate(int64(len(b)))
}

// present reports whether the ticket's name still refers to our file: a
// stealer evicts a holder by removing its name.
func (t *ticket) present() bool {
	id, _, err := t.q.Lstat(t.e.name)
	return err == nil && id == t.id
}

// drop removes the ticket (if it is still ours) and closes it.
func (t *ticket) drop() {
	if t.present() {
		t.q.Remove(t.e.name)
	}
	t.f.Close()
}

// probe reports whether the ticket e is owned by a live process. A dead
// owner's ticket is removed on the way: whoever finds it cleans it.
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
			q.Remove(e.name)
		}
	}
	return false, nil
}

// readRecord reads a ticket's content without locking it.
func readRecord(q *oslock.Dir, name string) (record, error) {
	f, err := q.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return record{}, err
	}
	defer f.Close()
	b := make([]byte, maxRecord)
	n, _ := f.ReadAt(b, 0)
	return decodeRecord(b[:n])
}

// prune removes the tickets and temporary files of dead processes from q.
func prune(ctx context.Context, q *oslock.Dir) error {
	names, err := q.Names()
	if err != nil {
		return err
	}
	for _, n := range names {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if e, ok := parseTicket(n); ok {
			if _, err := probe(q, e); err != nil {
				return err
			}
		} else if len(n) > len(tmpPrefix) && n[:len(tmpPrefix)] == tmpPrefix {
			probe(q, entry{name: n})
		}
	}
	return nil
}
