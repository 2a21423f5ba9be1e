package supervise

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/proctest"
)

// A spare that a term takes becomes COMMAND: the same process, in the
// term's cgroup (where this machine lets us make one), with the term's
// environment and COMMAND's exit status; it ran nothing before Start.
func TestSpareBecomesCommand(t *testing.T) {
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	argv := []string{"sh", "-c", `echo "$$ $LEADERRUN_TERM $(grep ^0:: /proc/self/cgroup)"; exit 3`}
	s, err := NewSpare(argv, os.Environ(), out)
	if err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, "the spare runs", s.usable)
	if b, _ := os.ReadFile(out.Name()); len(b) != 0 {
		t.Fatalf("the spare wrote %q before it was given COMMAND", b)
	}
	lk, err := elect.Open(elect.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	lead, err := lk.Acquire(t.Context(), "job", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Release()
	tm := Begin(t.Context(), lead, dir, s)
	defer tm.End()
	if tm.rec.id != s.id {
		t.Fatalf("term id %s, the spare was made for %s", tm.rec.id, s.id)
	}
	ch, err := tm.Start(argv, tm.Environ(os.Environ()), out)
	if err != nil {
		t.Fatal(err)
	}
	<-ch.Done()
	if got := ch.Status(); got != 3 {
		t.Fatalf("status %d, want COMMAND's 3", got)
	}
	b, _ := os.ReadFile(out.Name())
	f := strings.Fields(string(b))
	if len(f) != 3 || f[0] != strconv.Itoa(s.c.cmd.Process.Pid) || f[1] != s.id {
		t.Fatalf("COMMAND said %q; want the spare's pid %d and term %s", b, s.c.cmd.Process.Pid, s.id)
	}
	if tm.cg != nil && !strings.HasSuffix(f[2], "/leaderrun-"+s.id) {
		t.Fatalf("COMMAND ran in cgroup %s, not the term's %s", f[2], tm.cg.path)
	}
}

// A spare closed unused exits having run nothing, and its cgroup goes.
func TestSpareClosed(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	s, err := NewSpare([]string{"touch", ran}, os.Environ(), os.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, "the spare runs", s.usable)
	cg := s.cg
	s.Close()
	proctest.Eventually(t, "the spare exits", s.c.Exited)
	if cg != nil {
		proctest.Eventually(t, "its cgroup is removed", func() bool {
			_, err := os.Stat(cg.path)
			return os.IsNotExist(err)
		})
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("a closed spare ran COMMAND")
	}
	if got := s.c.Status(); got != 0 {
		t.Fatalf("closed spare exited %d, want 0", got)
	}
}

// What the spare is told at the grant: the variables added or changed,
// then go; nothing it could not export.
func TestSpareMessage(t *testing.T) {
	was := []string{"A=1", "B=2"}
	msg, ok := spareMessage(was, []string{"A=1", "B=3", "LEADERRUN_EPOCH=7"})
	if !ok || string(msg) != "B=3\nLEADERRUN_EPOCH=7\ngo\n" {
		t.Fatalf("spareMessage: %q %v", msg, ok)
	}
	for _, now := range [][]string{
		{"A=1"},                  // B removed
		{"A=1", "B=2", "C=x\ny"}, // a newline
		{"A=1", "B=2", "C-D=1"},  // not a shell name
		{"A=1", "B=2", "=1"},
	} {
		if msg, ok := spareMessage(was, now); ok {
			t.Errorf("spareMessage(%q, %q) = %q, want refused", was, now, msg)
		}
	}
}
