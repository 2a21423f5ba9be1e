//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package chaos

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

// Line is one line of the fenced log: KIND EPOCH PID UNIXNANO WRAPPER
// HOST [NOTE]. Kinds: S COMMAND started, T tick, E COMMAND ending, G a
// grandchild's tick, R a write refused by the fence, V a violation seen
// by COMMAND. Host is "-" where the suite has none.
type Line struct {
	Kind         string
	Epoch        uint64
	PID, Wrapper int
	Nanos        int64
	Host, Note   string
}

// ParseLine parses a line that a role of this package wrote.
func ParseLine(s string) (Line, bool) {
	l, err := proctest.ParseLogLine(s)
	if err != nil || len(l.Fields) < 2 {
		return Line{}, false
	}
	r := Line{Kind: l.Kind, Epoch: l.Epoch, PID: l.PID, Nanos: l.Nanos, Host: l.Fields[1]}
	r.Wrapper, err = strconv.Atoi(l.Fields[0])
	r.Note = strings.Join(l.Fields[2:], " ")
	return r, err == nil
}

// who names the wrapper of a line or term: "wrapper W", "on HOST" added
// where there is one.
func who(wrapper int, host string) string {
	if host == "" || host == "-" {
		return fmt.Sprintf("wrapper %d", wrapper)
	}
	return fmt.Sprintf("wrapper %d on %s", wrapper, host)
}

// Term is one leadership as the log shows it.
type Term struct {
	Epoch      uint64
	Wrapper    int
	Host       string
	PID        int   // its first COMMAND's
	Start, End int64 // first and last write
	LastKind   string
	Commands   int  // COMMAND starts: more than one after --restart
	Grandchild bool // a grandchild left behind wrote in it
}

// Checks adjust [Check].
type Checks struct {
	// Restarts allows more than one COMMAND start in a term
	// (--restart).
	Restarts bool
	// Violation receives each thing wrong (t.Errorf, or a collector for
	// a test of the detector).
	Violation func(format string, args ...any)
	// Before, if set, says what the test did just before a time (unix
	// ns), for the messages.
	Before func(ns int64) string
}

// Check reads the fenced log in res and checks it: no V line (two
// COMMANDs at once, as COMMAND's own flock saw it), no R line (a write
// of a deposed term refused by the fence), every line parses, each
// term's lines come from one wrapper and begin with a COMMAND's start,
// one start a term unless Restarts, epochs grow from term to term, time
// grows along the log, no term starts before the previous one's last
// write, and, in time order, no tick of a lower epoch follows a higher
// one. It returns the terms, in order, for the suite's report.
func Check(res string, ch Checks) ([]Term, error) {
	b, err := os.ReadFile(res + "/log")
	if err != nil {
		return nil, err
	}
	before := ch.Before
	if before == nil {
		before = func(int64) string { return "(not recorded)" }
	}
	bad := ch.Violation
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	var parsed []Line
	var terms []Term
	for i, s := range lines {
		if proctest.Torn(s) {
			continue // its writer was killed inside the write
		}
		r, ok := ParseLine(s)
		if !ok {
			bad("log line %d: cannot parse %q", i+1, s)
			continue
		}
		context := func() string { return strings.Join(lines[max(0, i-4):min(len(lines), i+3)], " | ") }
		switch r.Kind {
		case "V":
			bad("log line %d: two COMMANDs at once: %s (around it: %s); the test's last actions: %s", i+1, r.Note, context(), before(r.Nanos))
			continue
		case "R":
			bad("log line %d: write of a deposed term, pid %d of %s: %s (around it: %s); the test's last actions: %s", i+1, r.PID, who(r.Wrapper, r.Host), r.Note, context(), before(r.Nanos))
			continue
		}
		parsed = append(parsed, r)
		n := len(terms)
		switch {
		case n > 0 && r.Epoch == terms[n-1].Epoch:
			cur := &terms[n-1]
			if r.Wrapper != cur.Wrapper || r.Host != cur.Host {
				bad("log line %d: epoch %d used by %s and %s", i+1, r.Epoch, who(cur.Wrapper, cur.Host), who(r.Wrapper, r.Host))
			}
			if r.Nanos < cur.End {
				bad("log line %d: time goes backwards", i+1)
			}
			if r.Kind == "S" {
				cur.Commands++
				if !ch.Restarts {
					bad("log line %d: a second COMMAND start in term %d (no --restart here)", i+1, r.Epoch)
				}
			}
			cur.End, cur.LastKind = r.Nanos, r.Kind
			cur.Grandchild = cur.Grandchild || r.Kind == "G"
		case n > 0 && r.Epoch < terms[n-1].Epoch:
			p := terms[n-1]
			bad("log line %d: epoch %d (%s) after epoch %d (%s): epochs must increase (around it: %s); the test's last actions: %s",
				i+1, r.Epoch, who(r.Wrapper, r.Host), p.Epoch, who(p.Wrapper, p.Host), context(), before(r.Nanos))
		default:
			if r.Kind != "S" {
				bad("log line %d: epoch %d begins with %q, not a COMMAND's start", i+1, r.Epoch, r.Kind)
			}
			if n > 0 && r.Nanos < terms[n-1].End {
				bad("log line %d: term %d starts before term %d's last write", i+1, r.Epoch, terms[n-1].Epoch)
			}
			terms = append(terms, Term{Epoch: r.Epoch, Wrapper: r.Wrapper, Host: r.Host, PID: r.PID, Start: r.Nanos, End: r.Nanos,
				LastKind: r.Kind, Commands: 1, Grandchild: r.Kind == "G"})
		}
	}
	// The same in time order (the guard makes it log order; this checks
	// that, too): once an epoch has ticked, no lower one ticks later.
	slices.SortStableFunc(parsed, func(a, b Line) int { return cmp.Compare(a.Nanos, b.Nanos) })
	var highest uint64
	for _, r := range parsed {
		if r.Epoch < highest {
			bad("at %d: a tick of epoch %d (%s) after epoch %d ticked", r.Nanos, r.Epoch, who(r.Wrapper, r.Host), highest)
		}
		highest = max(highest, r.Epoch)
	}
	return terms, nil
}

// Tail reads the lines a fenced log gains, for a suite that follows the
// leader while it runs.
type Tail struct {
	path string
	off  int64
	rest []byte
}

// NewTail follows the log in res from its beginning.
func NewTail(res string) *Tail { return &Tail{path: res + "/log"} }

// Read calls fn with each whole line written since the last Read that
// parses.
func (t *Tail) Read(fn func(Line)) {
	f, err := os.Open(t.path)
	if err != nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		n, _ := f.ReadAt(buf, t.off)
		if n == 0 {
			return
		}
		t.off += int64(n)
		data := append(t.rest, buf[:n]...)
		i := bytes.LastIndexByte(data, '\n')
		t.rest = append([]byte(nil), data[i+1:]...)
		for _, s := range strings.Split(string(data[:i+1]), "\n") {
			if r, ok := ParseLine(s); ok {
				fn(r)
			}
		}
	}
}

// Wait reads the log until a line for which match is true comes, or ctx
// ends. It reads the file again every few milliseconds: a test's
// readiness wait, not a lock path.
func (t *Tail) Wait(ctx context.Context, match func(Line) bool) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		found := false
		t.Read(func(l Line) { found = found || match(l) })
		if found {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for a line in %s: %w", t.path, context.Cause(ctx))
		case <-tick.C:
		}
	}
}
