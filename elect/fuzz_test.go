package elect

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

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
