package man

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/internal/handovers"
)

// TestManUpToDate fails when docs/leaderrun.1 is not what the command
// definitions generate: run `go generate ./...` and commit the result.
func TestManUpToDate(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, cmd.ManualOf(handovers.Options()...)); err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("../../docs/leaderrun.1")
	if err != nil {
		t.Fatalf("%v; run go generate ./... from the repository root", err)
	}
	if !bytes.Equal(have, b.Bytes()) {
		t.Fatal("docs/leaderrun.1 is out of date; run go generate ./... from the repository root and commit it")
	}
}

// TestReadmeExitTable fails when docs/command.md's exit status table is not
// cmd.ExitCodes: run go generate ./... from the repository root.
func TestReadmeExitTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/command.md")
	if err != nil {
		t.Fatal(err)
	}
	s, ok := SpliceReadme(string(b))
	if !ok {
		t.Fatal("docs/command.md lacks the exit-codes or flock-migration markers")
	}
	if s != string(b) {
		t.Fatal("docs/command.md's generated tables are out of date; run go generate ./... from the repository root and commit it")
	}
}

// TestManContents checks that the page has every section, every flag and
// every exit code.
func TestManContents(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, cmd.ManualOf(handovers.Options()...)); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, s := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO"} {
		if !strings.Contains(page, "\n.SH "+s+"\n") {
			t.Errorf("no section %s", s)
		}
	}
	app := cmd.ManualOf(handovers.Options()...)
	for _, f := range app.Flags {
		if n := f.Names[0]; n != "help" && !strings.Contains(page, `\fB\-\-`+strings.ReplaceAll(n, "-", `\-`)+`\fR`) {
			t.Errorf("flag --%s is missing", n)
		}
	}
	for _, r := range cmd.ExitCodes {
		if !strings.Contains(page, "\n.B "+esc(r.Code)+"\n") {
			t.Errorf("exit code %s is missing", r.Code)
		}
	}
	if !strings.Contains(page, ".BR flock (1)") {
		t.Error("no see also flock(1)")
	}
	if !strings.Contains(page, "\n.SH FLOCK(1) MIGRATION\n") {
		t.Error("no FLOCK(1) MIGRATION section")
	}
	for _, flag := range []string{`\-x`, `\-e`, `\-s`, `\-n`, `\-w`, `\-E`, `\-o`, `\-u`, `\-F`, `\-c`} {
		if !strings.Contains(section(page, "FLOCK(1) MIGRATION"), ".B "+flag) && !strings.Contains(section(page, "FLOCK(1) MIGRATION"), ", "+flag) {
			t.Errorf("the flock(1) migration table does not say what flock's %s becomes", flag)
		}
	}
	env := section(page, "ENVIRONMENT")
	for _, v := range []string{"LEADERRUN_TERM", "LEADERRUN_INVOCATIONS_FD", "LEADERRUN_REPLIES_FD", "LEADERRUN_ETCD_ENDPOINTS", "NOTIFY_SOCKET", "LEADERRUN_NAME", "LEADERRUN_EPOCH", "LEADERRUN_PID"} {
		if !strings.Contains(env, ".B "+strings.ReplaceAll(v, "-", `\-`)+"\n") {
			t.Errorf("ENVIRONMENT lacks %s", v)
		}
	}
	if ex := section(page, "EXAMPLES"); strings.Contains(ex, "SINGLE INSTANCE") || strings.Contains(ex, "INVOCATIONS_FD") {
		t.Errorf("the single-instance text is rendered inside EXAMPLES:\n%s", ex)
	}
	if !strings.Contains(section(page, "DESCRIPTION"), ".SS SINGLE INSTANCE\n") {
		t.Error("DESCRIPTION has no SINGLE INSTANCE sub-section")
	}
}

// TestManRenders runs man(1) on the page, where it is installed, and
// checks that groff has no complaint.
func TestManRenders(t *testing.T) {
	if _, err := exec.LookPath("groff"); err != nil {
		t.Skip("no groff")
	}
	c := exec.Command("groff", "-man", "-Tutf8", "-ww", "-Wbreak", "-z", "../../docs/leaderrun.1")
	out, err := c.CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("groff: %v\n%s", err, out)
	}
}

// section is the text of the page's section name, up to the next one.
func section(page, name string) string {
	_, s, ok := strings.Cut(page, "\n.SH "+name+"\n")
	if !ok {
		return ""
	}
	s, _, _ = strings.Cut(s, "\n.SH ")
	return s
}
