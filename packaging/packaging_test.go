// Package packaging_test checks what packaging/ makes: the notices of the
// third-party code the binary links, and the Debian copyright file.
package packaging_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func notices(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("./notices.sh", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("notices.sh %s: %v: %s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// TestThirdPartyNoticesCurrent: the checked-in THIRD_PARTY_NOTICES is what
// notices.sh makes of the modules the binary links today.
func TestThirdPartyNoticesCurrent(t *testing.T) {
	have, err := os.ReadFile("../THIRD_PARTY_NOTICES")
	if err != nil {
		t.Fatal(err)
	}
	if want := notices(t); !bytes.Equal(have, want) {
		t.Errorf("THIRD_PARTY_NOTICES is not current: run packaging/notices.sh > THIRD_PARTY_NOTICES")
	}
}

// TestNoticesCoverBinary builds the binary as build-deb.sh does and checks
// that every module `go version -m` says it links has its notice, with its
// version, and the standard library too: a cross-check of notices.sh's
// `go list -deps`.
func TestNoticesCoverBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "leaderrun")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile("../THIRD_PARTY_NOTICES")
	if err != nil {
		t.Fatal(err)
	}
	deps := 0
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || (f[0] != "dep" && f[0] != "=>") {
			continue
		}
		deps++
		if !bytes.Contains(text, []byte("\n"+f[1]+" "+f[2]+"\n")) {
			t.Errorf("the binary links %s %s, which THIRD_PARTY_NOTICES does not name", f[1], f[2])
		}
	}
	if deps == 0 {
		t.Fatalf("go version -m names no dependencies:\n%s", out)
	}
	for _, want := range []string{"\nGo standard library and runtime (https://go.dev)\nLICENSE: BSD-3-Clause\n"} {
		if !bytes.Contains(text, []byte(want)) {
			t.Errorf("THIRD_PARTY_NOTICES lacks %q", want)
		}
	}
}

// TestDebianCopyright: the copyright file of the .deb is in Debian's
// machine-readable format: a header naming the format, then Files
// paragraphs each with Copyright and License, leaderrun's own (Files: *,
// Apache-2.0) first, and a License paragraph for every licence named only
// by its short name.
func TestDebianCopyright(t *testing.T) {
	out := string(notices(t, "--copyright"))
	paras := strings.Split(strings.TrimSuffix(out, "\n"), "\n\n")
	field := func(p, name string) (string, bool) {
		for _, l := range strings.Split(p, "\n") {
			if v, ok := strings.CutPrefix(l, name+":"); ok {
				return strings.TrimSpace(v), true
			}
		}
		return "", false
	}
	if v, _ := field(paras[0], "Format"); v != "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" {
		t.Fatalf("header: Format %q", v)
	}
	for _, f := range []string{"Upstream-Name", "Source"} {
		if _, ok := field(paras[0], f); !ok {
			t.Errorf("header lacks %s", f)
		}
	}
	defined := map[string]bool{}
	var used []string
	files := 0
	for i, p := range paras[1:] {
		for _, l := range strings.Split(p, "\n") {
			if l == "" || (l[0] != ' ' && !strings.Contains(l, ":")) {
				t.Errorf("paragraph %d: line %q is neither a field nor a continuation", i+1, l)
			}
		}
		lic, ok := field(p, "License")
		if !ok {
			t.Errorf("paragraph %d has no License: %q", i+1, p)
			continue
		}
		pattern, isFiles := field(p, "Files")
		if !isFiles {
			defined[lic] = true // a stand-alone License paragraph
			continue
		}
		files++
		if files == 1 && (pattern != "*" || lic != "Apache-2.0") {
			t.Errorf("the first Files paragraph is %q under %q, want leaderrun's own: * under Apache-2.0", pattern, lic)
		}
		if _, ok := field(p, "Copyright"); !ok {
			t.Errorf("Files: %s has no Copyright", pattern)
		}
		// A licence whose text does not follow is defined elsewhere.
		if after := p[strings.Index(p, "License: "+lic)+len("License: "+lic):]; !strings.HasPrefix(after, "\n ") || strings.HasPrefix(after, "\n See the License:") {
			used = append(used, lic)
		}
	}
	for _, lic := range used {
		if !defined[lic] {
			t.Errorf("licence %s is named but its text is nowhere", lic)
		}
	}
	if files < 4 {
		t.Errorf("%d Files paragraphs, want leaderrun's, the standard library's and the modules'", files)
	}
}
