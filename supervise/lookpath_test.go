package supervise

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLookPathRemembers: a second look for a name finds the program the
// first found while it is there and PATH is unchanged, even if one is put
// earlier on PATH meanwhile; once it is gone, or PATH changes, PATH is
// searched again.
func TestLookPathRemembers(t *testing.T) {
	early, late := t.TempDir(), t.TempDir()
	prog := func(dir string) string {
		p := filepath.Join(dir, "lr-lookpath-test")
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("PATH", early+string(filepath.ListSeparator)+late)
	inLate := prog(late)
	if p, err := LookPath("lr-lookpath-test"); err != nil || p != inLate {
		t.Fatalf("first look: %q, %v; want %q", p, err, inLate)
	}
	inEarly := prog(early)
	if p, err := LookPath("lr-lookpath-test"); err != nil || p != inLate {
		t.Fatalf("second look: %q, %v; want the program found first, %q", p, err, inLate)
	}
	if err := os.Remove(inLate); err != nil {
		t.Fatal(err)
	}
	if p, err := LookPath("lr-lookpath-test"); err != nil || p != inEarly {
		t.Fatalf("after the first one went: %q, %v; want %q", p, err, inEarly)
	}
	prog(late)
	t.Setenv("PATH", late)
	if p, err := LookPath("lr-lookpath-test"); err != nil || p != filepath.Join(late, "lr-lookpath-test") {
		t.Fatalf("with another PATH: %q, %v; want the one on it", p, err)
	}
	if _, err := LookPath("lr-lookpath-test-none"); err == nil {
		t.Fatal("a program on no PATH was found")
	}
}
