package elect

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/leaderrun/leaderrun/oslock"
)

// The state file <name>.state holds two counters, updated under a brief
// flock of the file itself: the last ticket number handed out, so that a
// number is never reused, and the last epoch granted.
//
// Epochs are derived so that they cannot go backwards even when a reboot
// wipes a tmpfs lock directory: a new epoch is the larger of the last one
// plus one and the wall clock in microseconds since 1970. A counter alone
// would restart at 1.
type state struct {
	seq   uint64
	epoch uint64
}

const stateFormat = "leaderrun-state v1 seq %d epoch %d\n"

// updateState runs fn on the name's state under the state file's lock and
// writes back what fn leaves.
func updateState(ctx context.Context, d *oslock.Dir, name string, fn func(*state)) (state, error) {
	return withState(ctx, d, name, func(s *state) error { fn(s); return nil }, nil)
}

// withState is updateState for an fn that may fail (then nothing is
// written back), and with then, when not nil, run after the state is
// written, still under the lock.
func withState(ctx context.Context, d *oslock.Dir, name string, fn func(*state) error, then func(state) error) (state, error) {
	file := name + stateSuffix
	f, err := d.OpenFile(file, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return state{}, err
	}
	defer f.Close()
	if err := lockWait(ctx, f, true); err != nil {
		return state{}, err
	}
	defer oslock.Unlock(f) // before the Close above: see oslock.Drop
	buf := make([]byte, 128)
	n, err := f.ReadAt(buf, 0)
	if err != nil && err != io.EOF {
		return state{}, err
	}
	var s state
	if n > 0 {
		// An epoch that cannot grow (or a counter that cannot) would wrap
		// to a smaller one: the clock-derived epochs are far below it, so
		// only a file leaderrun did not write holds it.
		// Only the exact form leaderrun writes is accepted: Sscanf alone
		// lets extra spaces or trailing bytes through (found by
		// FuzzParseState).
		var ok bool
		s, ok = parseState(buf[:n])
		if !ok || s.epoch >= MaxEpoch || s.seq == math.MaxUint64 {
			return state{}, fmt.Errorf("%w: %s holds %q, which leaderrun did not write; nothing was changed. If no process is using %q, remove the file (epochs continue from the clock)",
				ErrCorrupt, filepath.Join(d.Path(), file), truncate(buf[:n]), name)
		}
	}
	if err := fn(&s); err != nil {
		return state{}, err
	}
	out := appendState(buf[:0], s)
	if _, err := f.WriteAt(out, 0); err != nil {
		return state{}, err
	}
	// Numbers only grow: the file shrinks only when it held more than a
	// state (it was read whole: n < len(buf)), which is then cut off.
	if len(out) < n {
		if err := f.Truncate(int64(len(out))); err != nil {
			return state{}, err
		}
	}
	if then != nil {
		if err := then(s); err != nil {
			return state{}, err
		}
	}
	return s, nil
}

// appendState appends s as stateFormat has it.
func appendState(b []byte, s state) []byte {
	b = append(b, statePrefix...)
	b = strconv.AppendUint(b, s.seq, 10)
	b = append(b, " epoch "...)
	b = strconv.AppendUint(b, s.epoch, 10)
	return append(b, '\n')
}

const statePrefix = "leaderrun-state v1 seq "

// parseState reads exactly what appendState writes (each number in its
// one decimal spelling), without fmt's scanning on every grant.
func parseState(b []byte) (state, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(statePrefix))
	if !ok {
		return state{}, false
	}
	seq, rest, ok := bytes.Cut(rest, []byte(" epoch "))
	if !ok {
		return state{}, false
	}
	epoch, ok := bytes.CutSuffix(rest, []byte("\n"))
	if !ok {
		return state{}, false
	}
	var s state
	if s.seq, ok = canonicalUint(seq); !ok {
		return state{}, false
	}
	if s.epoch, ok = canonicalUint(epoch); !ok {
		return state{}, false
	}
	return s, true
}

// canonicalUint parses b as strconv.AppendUint writes a number: digits,
// no sign, no leading zero.
func canonicalUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 1 && b[0] == '0' {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(string(b), 10, 64)
	return n, err == nil
}

// MaxEpoch bounds every epoch: they stay below it, so that an epoch reads
// the same as a Go int64, in a shell's arithmetic and in JSON. Epochs
// drawn from the clock (microseconds since 1970) are about 1.8e15 today,
// below 2^53 too, which JavaScript and jq read exactly, until the year
// 2255. A state file holding MaxEpoch or more was not written by
// leaderrun, and is refused as corrupt.
const MaxEpoch = math.MaxInt64

func nextEpoch(s *state) {
	s.epoch = max(s.epoch+1, uint64(time.Now().UnixMicro()))
}

// The lock file keeps a copy of the last epoch granted, as a floor for a
// state file that was removed or truncated (by hand, or by a cleaner that
// spares files in use: the lock file is open while anyone leads). Only
// the directory's removal loses both; epochs then continue from the wall
// clock, which keeps them increasing unless the clock was set back.
const floorFormat = "leaderrun-epoch %020d\n"

// grantEpoch is nextEpoch above the floor kept in lockF, which it then
// raises. It runs under the state file's lock, so floors are written in
// the order epochs are drawn. When the lock file does not hold the last
// epoch drawn, it is not the file the last holder locked (it was removed
// or replaced since): replaced is set, the floor is left for the caller to
// raise once it has made sure no holder of the old file is left.
// With the floor it writes head, the head of the line (see head.go), when
// head is not 0 and the ticket counter is not being recounted.
func grantEpoch(lockF *os.File, head uint64, replaced *bool) func(*state) {
	return func(s *state) {
		floor, ok := readFloor(lockF)
		*replaced = s.epoch != 0 && (!ok || floor != s.epoch)
		s.epoch = max(s.epoch, floor)
		nextEpoch(s)
		if *replaced {
			return
		}
		if s.seq == 0 {
			head = 0
		}
		writeFloorHead(lockF, s.epoch, head)
	}
}

// The floor is also kept as a tag of the lock file's inode (an extended
// attribute, where the filesystem has them), which truncation leaves:
// flock(1)'s idiom "9>FILE" truncates the lock file and with it the floor
// in its content. The higher of the two counts.
const floorTag = "leaderrun.epoch"

func readFloor(lockF *os.File) (uint64, bool) {
	var floor uint64
	ok := false
	var buf [len(floorPrefix) + 20 + 1]byte
	if n, _ := lockF.ReadAt(buf[:], 0); n == len(buf) {
		if f, found := parseFloor(buf[:]); found && f < MaxEpoch {
			floor, ok = f, true
		}
	}
	if b, found := oslock.Tag(lockF, floorTag); found {
		if t, err := strconv.ParseUint(string(b), 10, 64); err == nil && t < MaxEpoch && (!ok || t > floor) {
			floor, ok = t, true
		}
	}
	return floor, ok
}

const floorPrefix = "leaderrun-epoch "

// appendFloor appends epoch as floorFormat has it.
func appendFloor(b []byte, epoch uint64) []byte {
	b = append(b, floorPrefix...)
	b = appendDigits(b, epoch)
	return append(b, '\n')
}

// parseFloor reads what appendFloor writes: the prefix, 20 digits and a
// newline.
func parseFloor(b []byte) (uint64, bool) {
	digits, ok := bytes.CutPrefix(b, []byte(floorPrefix))
	if !ok || len(digits) != 21 || digits[20] != '\n' {
		return 0, false
	}
	var n uint64
	for _, c := range digits[:20] {
		if c < '0' || c > '9' || n > (math.MaxUint64-uint64(c-'0'))/10 {
			return 0, false
		}
		n = 10*n + uint64(c-'0')
	}
	return n, true
}

func writeFloor(lockF *os.File, epoch uint64) { writeFloorHead(lockF, epoch, 0) }

// writeFloorHead writes the floor and, unless head is 0, the head of the
// line's hint after it, in one write (see head.go). A floor written
// alone voids the hint after it.
func writeFloorHead(lockF *os.File, epoch, head uint64) {
	var buf [floorLen + headLen]byte
	b := appendFloor(buf[:0], epoch)
	if head != 0 {
		b = appendHead(b, head)
	}
	lockF.WriteAt(b, 0)
	oslock.SetTag(lockF, floorTag, strconv.AppendUint(nil, epoch, 10))
}

// raiseFloor writes epoch into lockF unless a higher one is there, under
// the state file's lock.
func raiseFloor(ctx context.Context, d *oslock.Dir, name string, lockF *os.File, epoch uint64) error {
	_, err := withState(ctx, d, name, func(*state) error { return nil }, func(state) error {
		if floor, _ := readFloor(lockF); floor < epoch {
			writeFloor(lockF, epoch)
		}
		return nil
	})
	return err
}

// lockWait takes f's flock. The state file's lock is held for the few
// microseconds of a read and a write, so the wait is a short back-off: a
// few yields, then sleeps from 50µs doubling to 100ms. It only goes on for
// longer when the holder was stopped or starved inside those microseconds;
// ctx cancels it.
func lockWait(ctx context.Context, f *os.File, exclusive bool) error {
	delay := 50 * time.Microsecond
	for i := 0; ; i++ {
		ok, err := oslock.TryLock(f, exclusive)
		if ok || err != nil {
			return err
		}
		if i < 20 {
			runtime.Gosched()
			continue
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

func truncate(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}
