package supervise

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/internal/layout"
	"github.com/leaderrun/leaderrun/oslock"
)

// A term marker, <dir>/<name>.cmd.<id>, exists while a term's COMMAND may
// be running: one per term, exclusive or shared. Its holder removes it once
// COMMAND and everything it started have been stopped, before it releases
// the lock. A marker whose leaderrun is gone means that term ended without
// that cleanup (SIGKILL, the OOM killer), so its leftovers may still run:
// the next holder fences them off before it starts its own COMMAND.
//
// The id is 128 random bits, so no other directory or term can share it,
// whatever the directory is called (a private /tmp, a symlinked parent).
// COMMAND carries it as LEADERRUN_TERM, and the marker records:
//
//	leaderrun-term 1
//	id <id>
//	wrapper <pid> <start>           leaderrun itself
//	pidns <inode>                   the pid namespace the pids are in
//	cgroup <path>                   if COMMAND runs in a cgroup of its own
//	command <pid> <start> <pgid>    the latest COMMAND, once started
//	.
//
// where start is the process's start time (proc(5) /proc/PID/stat field
// 22), so that a recycled pid is never mistaken for the recorded one, and
// pids of another pid namespace (a container sharing the directory) are
// never signalled. Unknown lines are skipped.
const (
	termHeader  = "leaderrun-term 1"
	termEnv     = "LEADERRUN_TERM"
	termIDLen   = 32
	fenceBudget = 5 * time.Second
)

// testFence, from TEST_LEADERRUN_FENCE, lets tests switch parts of the
// fence off to exercise the others alone: "nocgroup" (the fallback on the
// process group and the term id), "nowatchdog" (the successor's fence).
var testFence = os.Getenv("TEST_LEADERRUN_FENCE")

// termRecord is what a marker says about its term.
type termRecord struct {
	id             string
	wpid           int
	wstart         uint64
	pidns          uint64
	cgroup         string
	cpid, pgid     int
	cstart         uint64
	commandStarted bool
}

func (r *termRecord) String() string { return string(r.appendTo(nil)) }

// appendTo appends the record as String gives it, without fmt (every
// start writes it twice).
func (r *termRecord) appendTo(b []byte) []byte {
	b = append(b, termHeader+"\nid "...)
	b = append(b, r.id...)
	b = append(b, "\nwrapper "...)
	b = strconv.AppendInt(b, int64(r.wpid), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, r.wstart, 10)
	b = append(b, '\n')
	if r.pidns != 0 {
		b = append(b, "pidns "...)
		b = strconv.AppendUint(b, r.pidns, 10)
		b = append(b, '\n')
	}
	if r.cgroup != "" {
		b = append(b, "cgroup "...)
		b = append(b, r.cgroup...)
		b = append(b, '\n')
	}
	b = appendCommand(b, r)
	return append(b, ".\n"...)
}

// commandMsg is the record's command line, also the message that tells
// the watchdog about a new COMMAND; "" before the first.
func commandMsg(r *termRecord) string { return string(appendCommand(nil, r)) }

func appendCommand(b []byte, r *termRecord) []byte {
	if !r.commandStarted {
		return b
	}
	b = append(b, "command "...)
	b = strconv.AppendInt(b, int64(r.cpid), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, r.cstart, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(r.pgid), 10)
	return append(b, '\n')
}

func parseCommand(val string, r *termRecord) bool {
	// "<pid> <start> <pgid>"; what follows is ignored, as Sscanf did.
	f := strings.Fields(val)
	ok := len(f) >= 3
	if ok {
		var e1, e2, e3 error
		r.cpid, e1 = strconv.Atoi(f[0])
		r.cstart, e2 = strconv.ParseUint(f[1], 10, 64)
		r.pgid, e3 = strconv.Atoi(f[2])
		ok = e1 == nil && e2 == nil && e3 == nil
	}
	r.commandStarted = ok && r.cpid > 0 && r.pgid > 0
	return r.commandStarted
}

var errBadMarker = errors.New("not a term marker leaderrun writes")

// foreignPids reports whether r's pids are of another pid namespace.
func foreignPids(r *termRecord) bool {
	return r.pidns != 0 && selfPidNS != 0 && r.pidns != selfPidNS
}

// parseTermRecord reads a marker. A record is complete only up to its "."
// line: what follows is the tail of a longer earlier version.
func parseTermRecord(b []byte) (*termRecord, error) {
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	if !sc.Scan() || sc.Text() != termHeader {
		return nil, errBadMarker
	}
	r := &termRecord{}
	for sc.Scan() {
		key, val, _ := strings.Cut(sc.Text(), " ")
		var err error
		switch key {
		case ".":
			if !validTermID(r.id) || r.wpid <= 0 {
				return nil, errBadMarker
			}
			return r, nil
		case "id":
			r.id = val
		case "wrapper":
			_, err = fmt.Sscanf(val, "%d %d", &r.wpid, &r.wstart)
		case "pidns":
			r.pidns, err = strconv.ParseUint(val, 10, 64)
		case "cgroup":
			r.cgroup = val
		case "command":
			if !parseCommand(val, r) {
				err = errBadMarker
			}
		}
		if err != nil {
			return nil, errBadMarker
		}
	}
	return nil, errBadMarker
}

func validTermID(id string) bool {
	if len(id) != termIDLen {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// markerID returns the term id of a marker's file name for name, or "".
func markerID(file, name string) string {
	id, ok := strings.CutPrefix(file, layout.TermMarkerPrefix(name))
	if !ok || !validTermID(id) {
		return ""
	}
	return id
}

func readMarker(d *oslock.Dir, file string) (*termRecord, error) {
	f, err := d.OpenFile(file, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, err
	}
	return parseTermRecord(b)
}
