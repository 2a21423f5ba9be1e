package elect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/leaderrun/leaderrun/oslock"
)

// Fuzz targets for every decoder of what others may have written into the
// lock directory, and for lock names. Seed corpora are in
// testdata/fuzz/<target>; .ci/fuzz.sh runs each briefly.

// FuzzParseTicket: a name is a ticket only in its one canonical spelling.
func FuzzParseTicket(f *testing.F) {
	for _, s := range []string{"t00000000000000000001", "s00000000000000000007", "t18446744073709551615", "t18446744073709551616", "x00000000000000000001", "t0000000000000000001", ".tmp-1-ab", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		e, ok := parseTicket(name)
		if !ok {
			return
		}
		if e.name != name || ticketName(e.seq, e.steal) != name {
			t.Fatalf("%q parsed as %+v, which spells %q", name, e, ticketName(e.seq, e.steal))
		}
	})
}

// FuzzDecodeRecord: a ticket's content either decodes to a record with a
// pid, which encodes and decodes to itself, or is refused; never a panic.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte(`{"pid":12,"mode":"exclusive","since":"2026-01-02T03:04:05Z","command":["sleep","1"]}` + "\n"))
	f.Add([]byte(`{"pid":12,"mode":"shared","since":"2026-01-02T03:04:05Z","epoch":1795981119000000,"granted":"2026-01-02T03:04:06Z","steal":true}`))
	f.Add([]byte(`{"pid":12,"mode":"exclu`))
	f.Add([]byte(`{"pid":-1}`))
	f.Add([]byte(`{"pid":1,"mode":"weird"}`))
	f.Add([]byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		if r.PID <= 0 {
			t.Fatalf("accepted pid %d", r.PID)
		}
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("accepted record does not encode: %v", err)
		}
		r2, err := decodeRecord(out)
		if err != nil || !reflect.DeepEqual(normRecord(r), normRecord(r2)) {
			t.Fatalf("round trip: %+v -> %s -> %+v, %v", r, out, r2, err)
		}
	})
}

func normRecord(r record) record {
	r.Since, r.Granted = r.Since.UTC(), r.Granted.UTC()
	if len(r.Command) == 0 {
		r.Command = nil
	}
	return r
}

// FuzzParseState: a state file either parses, and is then rewritten in
// its canonical form with the same counters, or gives ErrCorrupt with the
// file left exactly as it was.
func FuzzParseState(f *testing.F) {
	f.Add([]byte("leaderrun-state v1 seq 3 epoch 1795981119000000\n"))
	f.Add([]byte("leaderrun-state v1 seq 0 epoch 0\n"))
	f.Add([]byte("leaderrun-state v1 seq 3 epo"))
	f.Add([]byte("leaderrun-state v1 seq -1 epoch 2\n"))
	f.Add([]byte("leaderrun-state v1 seq 1 epoch 99999999999999999999\n"))
	f.Add([]byte("leaderrun-state v2 seq 1 epoch 1\n"))
	f.Add([]byte("hello\n"))
	f.Add([]byte{})
	dir := f.TempDir()
	d, err := oslock.OpenDir(dir, oslock.DirOptions{AllowUnsafeFS: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { d.Close() })
	file := filepath.Join(dir, "n"+stateSuffix)
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
		var seen state
		s, err := updateState(t.Context(), d, "n", func(s *state) { seen = *s })
		after, _ := os.ReadFile(file)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%q: error %v is not ErrCorrupt", b, err)
			}
			if !bytes.Equal(after, b) {
				t.Fatalf("refused state %q was changed to %q", b, after)
			}
			if !strings.Contains(err.Error(), file) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if s != seen {
			t.Fatalf("state changed without fn: %+v -> %+v", seen, s)
		}
		if len(b) > 0 && seen == (state{}) && !bytes.HasPrefix(b, []byte("leaderrun-state v1 seq 0 epoch 0")) {
			// Non-empty content parsed as zeros must have said zeros.
			t.Fatalf("%q parsed as the zero state", b)
		}
		s2, err := updateState(t.Context(), d, "n", func(*state) {})
		if err != nil || s2 != s {
			t.Fatalf("rewritten state %q reads back as %+v, %v; want %+v", after, s2, err, s)
		}
	})
}

// FuzzValidateName: an accepted name is one plain file-name component that
// stays inside the lock directory with every suffix added to it.
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"backup", "a", "", "/", "..", ".", "a/b", "-x", ".x", "a\x00b", "a\nb", "ä", strings.Repeat("a", 64), strings.Repeat("a", 65), "job@host:1,2=3+4", "con"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateName(name)
		if err != nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("%q: error %v is not ErrInvalidName", name, err)
			}
			return
		}
		if name == "" || len(name) > MaxNameLen || name[0] == '.' || name[0] == '-' {
			t.Fatalf("accepted %q", name)
		}
		for _, suf := range []string{lockSuffix, queueSuffix, stateSuffix, ".sock"} {
			p := filepath.Join("/d", name+suf)
			if filepath.Dir(p) != "/d" || filepath.Base(p) != name+suf {
				t.Fatalf("accepted %q escapes the directory as %q", name, p)
			}
		}
		if strings.ContainsAny(name, "/\x00 \t\n\\*?[]$`'\"") {
			t.Fatalf("accepted %q with a special character", name)
		}
	})
}

// FuzzRecordCodec holds the reflection-free record codec (record.go) to
// encoding/json: what the scan accepts decodes as json.Unmarshal decodes
// it, and every record encodes to the bytes json.Marshal makes.
func FuzzRecordCodec(f *testing.F) {
	for _, s := range recordSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkRecordCodec(t, b)
	})
}

var recordSeeds = []string{
	`{"pid":12,"mode":"exclusive","since":"2026-01-02T03:04:05Z","command":["sleep","1"]}` + "\n",
	`{"pid":12,"mode":"shared","since":"2026-01-02T03:04:05.123456789+02:00","epoch":1795981119000000,"granted":"2026-01-02T03:04:06Z","steal":true,"deposed":true,"polling":false,"labels":["a","b"]}    `,
	`{"pid":12,"command":[],"labels":[]}`,
	`{"pid":12,"command":null}`,
	`{"PID":12}`,
	`{"pid":12,"pid":13}`,
	`{"pid":12,"x":1}`,
	`{"pid":1.5}`,
	`{"pid":1e3}`,
	`{"pid":012}`,
	`{"pid":-0}`,
	`{"pid":99999999999999999999}`,
	`{"pid":1,"epoch":-1}`,
	`{"pid":1,"mode":"weird"}`,
	`{"pid":1,"mode":"sh\u0061red"}`,
	`{"pid":1,"command":["a\"b","<&>","\u2028","\ud83d\ude00"]}`,
	`{"pid":1,"command":["\u003e\u0026\/\b\f\n\r\t\u001F\u007f"]}`,
	`{"pid":1,"command":["\u00"]}`,
	`{"pid":1,"command":["\u0080","\u00e9"]}`,
	`{"pid":1,"command":["\u00G1"]}`,
	`{"pid":1,"command":["\x41"]}`,
	`{"pid":1,"command":["a\`,
	`{"pid":1,"since":"2026-01-02T03:04:05"}`,
	`{"pid":1,"since":null}`,
	`{"pid":1,}`,
	`{"pid":1} x`,
	` { "pid" : 1 , "steal" : true } `,
	`{"pid":1,"steal":tru}`,
	"{\"pid\":1,\"command\":[\"\xff\"]}",
	`{}`,
	``,
}

func checkRecordCodec(t *testing.T, b []byte) {
	t.Helper()
	var want record
	jerr := json.Unmarshal(b, &want)
	if got, ok := scanRecord(b); ok {
		if jerr != nil {
			t.Fatalf("%q: scanned, but encoding/json refuses it: %v", b, jerr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: scanned %#v, encoding/json decodes %#v", b, got, want)
		}
	}
	if got, err := parseRecord(b); (err == nil) != (jerr == nil) || err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: parseRecord %#v, %v; encoding/json %#v, %v", b, got, err, want, jerr)
	}
	if jerr != nil {
		return
	}
	checkEncode(t, want)
}

func checkEncode(t *testing.T, r record) {
	t.Helper()
	want, jerr := json.Marshal(r)
	got, err := appendRecord(nil, &r)
	if (err == nil) != (jerr == nil) || !bytes.Equal(got, want) {
		t.Fatalf("%#v: appendRecord %s, %v; json.Marshal %s, %v", r, got, err, want, jerr)
	}
}

// TestRecordCodec: records as leaderrun writes them take the scan (not
// encoding/json), and encode as json.Marshal does, with every kind of
// string that needs escaping.
func TestRecordCodec(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", 3600))
	plain := []record{
		{PID: 1, Since: since},
		{PID: 4194304, Mode: Shared, Since: since.UTC(), Command: []string{"leaderrun", "--name", "x", "--", "sh", "-c", "sleep 1; echo é 😀"}, Steal: true, Epoch: 1795981119000000, Granted: since.Add(time.Second), Deposed: true, Polling: true, Labels: []string{"role=db", "zone a"}},
	}
	for _, r := range plain {
		b, err := appendRecord(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := scanRecord(b); !ok {
			t.Errorf("%s: not taken by the scan", b)
		}
		checkRecordCodec(t, b)
	}
	for _, s := range []string{"a\"b\\c", "<a&b>", "\b\f\n\r\t\x00\x01\x1f\x7f", "\u2028\u2029", "\xff\xfe", "é\xc3", "😀", ""} {
		checkEncode(t, record{PID: 1, Since: since, Command: []string{s}, Labels: []string{s, s}})
		b, _ := appendRecord(nil, &record{PID: 1, Since: since, Command: []string{s}})
		if _, ok := scanRecord(b); !ok && isASCII(s) {
			t.Errorf("%s: not taken by the scan", b) // its escapes are the scan's own
		}
		checkRecordCodec(t, b)
	}
	checkEncode(t, record{PID: 1, Since: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}) // refused by both
	for _, s := range recordSeeds {
		checkRecordCodec(t, []byte(s))
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// TestStateFormats: the state file and the lock file's floor are written
// and read without fmt, in the formats stateFormat and floorFormat name
// (which older leaderruns write and read with fmt).
func TestStateFormats(t *testing.T) {
	for _, n := range []uint64{0, 1, 9, 10, 1795981119000000, MaxEpoch - 1, MaxEpoch, 1<<64 - 1} {
		s := state{seq: n / 3, epoch: n}
		b := appendState(nil, s)
		if want := fmt.Sprintf(stateFormat, s.seq, s.epoch); string(b) != want {
			t.Errorf("appendState %+v: %q, want %q", s, b, want)
		}
		if got, ok := parseState(b); !ok || got != s {
			t.Errorf("parseState %q: %+v, %v", b, got, ok)
		}
		f := appendFloor(nil, n)
		if want := fmt.Sprintf(floorFormat, n); string(f) != want {
			t.Errorf("appendFloor %d: %q, want %q", n, f, want)
		}
		if got, ok := parseFloor(f); !ok || got != n {
			t.Errorf("parseFloor %q: %d, %v", f, got, ok)
		}
	}
	for _, bad := range []string{"", "leaderrun-state v1 seq 01 epoch 1\n", "leaderrun-state v1 seq +1 epoch 1\n", "leaderrun-state v1 seq 1 epoch 1", "leaderrun-state v1 seq 1 epoch 1\n ", "leaderrun-state v1 seq  1 epoch 1\n", "leaderrun-state v1 seq 1 epoch 18446744073709551616\n"} {
		if s, ok := parseState([]byte(bad)); ok {
			t.Errorf("parseState %q: accepted as %+v", bad, s)
		}
	}
	for _, bad := range []string{"leaderrun-epoch 99999999999999999999\n", "leaderrun-epoch -0000000000000000001\n", "leaderrun-epoch 0000000000000000001x\n", "leaderrun-epoch 00000000000000000001 "} {
		if n, ok := parseFloor([]byte(bad)); ok {
			t.Errorf("parseFloor %q: accepted as %d", bad, n)
		}
	}
}
