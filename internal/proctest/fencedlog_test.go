//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package proctest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A write of an epoch lower than the highest written is refused and logged
// as R, naming the fence; a V line is written whatever its epoch; every
// line parses back.
func TestFencedLog(t *testing.T) {
	dir := t.TempDir()
	f, err := OpenFencedLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, w := range []struct {
		kind  string
		epoch uint64
		ok    bool
	}{{"S", 3, true}, {"T", 3, true}, {"S", 2, false}, {"V", 1, false}, {"S", 10, true}, {"T", 9, false}} {
		if ok, err := f.Append(w.kind, w.epoch, "f1", "two\nlines"); err != nil || ok != w.ok {
			t.Fatalf("Append(%s, %d): %v, %v; want %v", w.kind, w.epoch, ok, err, w.ok)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		l, err := ParseLogLine(line)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if l.PID != os.Getpid() || l.Nanos == 0 || l.Fields[0] != "f1" || l.Fields[1] != "two" {
			t.Errorf("parsed %q as %+v", line, l)
		}
		kinds = append(kinds, l.Kind+strconv.FormatUint(l.Epoch, 10))
		if l.Kind == "R" && !strings.HasSuffix(line, "-refused-after-3") && !strings.HasSuffix(line, "-refused-after-10") {
			t.Errorf("refused line %q does not say after what", line)
		}
	}
	if got := strings.Join(kinds, " "); got != "S3 T3 R2 V1 S10 R9" {
		t.Errorf("log kinds %q", got)
	}
	if _, err := ParseLogLine("S 1 2"); err == nil {
		t.Error("ParseLogLine accepted 3 fields")
	}
}

// A writer killed inside its write can leave part of its line (SIGKILL
// cuts a write at a page boundary): the next Append ends that part with
// the torn mark, so its own line stays whole, and the part reads as Torn,
// unless it is a V or R line, which fails however little was written.
func TestFencedLogTorn(t *testing.T) {
	dir := t.TempDir()
	f, err := OpenFencedLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Append("S", 5, "f1"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.log.WriteString("T 5 4242 1796"); err != nil { // the killed writer's part
		t.Fatal(err)
	}
	if ok, err := f.Append("T", 5, "f1"); err != nil || !ok {
		t.Fatalf("Append after a torn line: %v, %v", ok, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 3 || lines[1] != "T 5 4242 1796"+tornSuffix {
		t.Fatalf("log %q", lines)
	}
	if _, err := ParseLogLine(lines[1]); !errors.Is(err, ErrTorn) || !Torn(lines[1]) {
		t.Errorf("torn line %q: %v", lines[1], err)
	}
	for _, cut := range []string{"V 5 4242 17", "R 3 4242 1796"} {
		if _, err := ParseLogLine(cut + tornSuffix); err == nil || errors.Is(err, ErrTorn) || Torn(cut+tornSuffix) {
			t.Errorf("a cut %q line passed as torn (%v): what it reports would be lost", cut[:1], err)
		}
	}
	for _, l := range []string{lines[0], lines[2]} {
		if _, err := ParseLogLine(l); err != nil || Torn(l) {
			t.Errorf("whole line %q: %v", l, err)
		}
	}
}
