//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package proctest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// FencedLog is the shared resource of the chaos tests: a log appended to
// under a flock of its guard file, which also keeps the highest epoch
// written so far. A write whose epoch is lower is refused and recorded as
// an R line instead (fencing), so the log never holds a write of a deposed
// term after its successor's first one.
type FencedLog struct{ guard, log *os.File }

// OpenFencedLog opens (creating) the log "log" and its guard "guard" in dir.
func OpenFencedLog(dir string) (*FencedLog, error) {
	g, err := os.OpenFile(filepath.Join(dir, "guard"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	l, err := os.OpenFile(filepath.Join(dir, "log"), os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		g.Close()
		return nil, err
	}
	return &FencedLog{guard: g, log: l}, nil
}

// Close closes the log and its guard.
func (f *FencedLog) Close() { f.guard.Close(); f.log.Close() }

// Append writes the line "KIND EPOCH PID UNIXNANO FIELDS..." and reports
// whether epoch passed the fence. A refused write is logged as
// "R EPOCH PID UNIXNANO FIELDS... KIND-refused-after-HIGHEST". A V
// (violation) line is written whatever its epoch. The guard's new epoch is
// written before the line: a writer killed in between loses its line,
// never the fence. A writer killed inside its write may leave part of a
// line (the kernel can cut a write at a page boundary for SIGKILL): the
// next Append ends it with tornSuffix and a newline (see Torn).
func (f *FencedLog) Append(kind string, epoch uint64, fields ...string) (bool, error) {
	// Bounded: a guard holder that is killed drops the lock.
	deadline := time.Now().Add(Wait)
	for {
		err := unix.Flock(int(f.guard.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			return false, err
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("fenced log guard busy for %v", Wait)
		}
		time.Sleep(200 * time.Microsecond)
	}
	defer unix.Flock(int(f.guard.Fd()), unix.LOCK_UN)
	if err := f.mend(); err != nil {
		return false, err
	}
	buf := make([]byte, 32)
	n, _ := f.guard.ReadAt(buf, 0)
	highest, _ := strconv.ParseUint(strings.TrimSpace(string(buf[:n])), 10, 64)
	ok := epoch >= highest
	if !ok && kind != "V" {
		fields = append(fields, fmt.Sprintf("%s-refused-after-%d", kind, highest))
		kind = "R"
	}
	if ok && epoch > highest {
		s := fmt.Sprintf("%020d\n", epoch) // fixed width: never shrinks
		if _, err := f.guard.WriteAt([]byte(s), 0); err != nil {
			return false, err
		}
	}
	line := fmt.Sprintf("%s %d %d %d", kind, epoch, os.Getpid(), time.Now().UnixNano())
	for _, fl := range fields {
		line += " " + strings.ReplaceAll(fl, "\n", " ")
	}
	if _, err := f.log.WriteString(line + "\n"); err != nil {
		return false, err
	}
	return ok, nil
}

// tornSuffix ends a line whose writer was killed inside its write.
const tornSuffix = "~"

// mend ends a line left unfinished by a killed writer.
func (f *FencedLog) mend() error {
	st, err := f.log.Stat()
	if err != nil || st.Size() == 0 {
		return err
	}
	var last [1]byte
	if _, err := f.log.ReadAt(last[:], st.Size()-1); err != nil {
		return err
	}
	if last[0] != '\n' {
		_, err = f.log.WriteString(tornSuffix + "\n")
	}
	return err
}

// Torn reports whether line is what a writer killed inside its write left
// of its line: no record, to be skipped (its writer's term is told by its
// other lines, as when it is killed before its write). A cut V or R line
// is not Torn: what it reports (two COMMANDs at once, a refused write) is
// a failure however little of it was written.
func Torn(line string) bool {
	return strings.HasSuffix(line, tornSuffix) && !strings.HasPrefix(line, "V ") && !strings.HasPrefix(line, "R ")
}

// ErrTorn is ParseLogLine's error for a Torn line; a cut V or R line
// fails to parse with another error.
var ErrTorn = errors.New("a line cut short by its writer's death (SIGKILL inside the write)")

// LogLine is one parsed line of a FencedLog.
type LogLine struct {
	Kind   string
	Epoch  uint64
	PID    int
	Nanos  int64
	Fields []string
}

// ParseLogLine parses a line written by Append.
func ParseLogLine(s string) (LogLine, error) {
	if Torn(s) {
		return LogLine{}, ErrTorn
	}
	if strings.HasSuffix(s, tornSuffix) {
		return LogLine{}, errors.New("a V or R line cut short by its writer's death")
	}
	f := strings.Fields(s)
	if len(f) < 4 {
		return LogLine{}, errors.New("fewer than 4 fields")
	}
	var r LogLine
	var err1, err2, err3 error
	r.Kind = f[0]
	r.Epoch, err1 = strconv.ParseUint(f[1], 10, 64)
	r.PID, err2 = strconv.Atoi(f[2])
	r.Nanos, err3 = strconv.ParseInt(f[3], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return LogLine{}, err
	}
	r.Fields = f[4:]
	return r, nil
}
