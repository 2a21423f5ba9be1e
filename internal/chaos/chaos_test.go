//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	// No leaderrun here: the tests run the roles under the test itself.
	Main(m, "leaderrun-not-linked", func() int { return 2 })
}

// startCommand starts the COMMAND role of spec as if leaderrun, this
// process, had started it in term epoch.
func startCommand(t *testing.T, spec Spec, epoch int) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(self, "-test.run=^$")
	c.Env = append(spec.Env(), fmt.Sprintf("LEADERRUN_EPOCH=%d", epoch), fmt.Sprintf("LEADERRUN_PID=%d", os.Getpid()), "LEADERRUN_NAME=chaos")
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// exitCode waits for c and returns its exit code.
func exitCode(t *testing.T, c *exec.Cmd) int {
	t.Helper()
	err := c.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return c.ProcessState.ExitCode()
}

// waitLine waits (bounded) until the log in res has a line of kind.
func waitLine(t *testing.T, res, kind string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := NewTail(res).Wait(ctx, func(l Line) bool { return l.Kind == kind }); err != nil {
		t.Fatal(err)
	}
}

func check(t *testing.T, res string, ch Checks) ([]Term, []string) {
	t.Helper()
	var found []string
	ch.Violation = func(format string, args ...any) { found = append(found, fmt.Sprintf(format, args...)) }
	terms, err := Check(res, ch)
	if err != nil {
		t.Fatal(err)
	}
	return terms, found
}

// TestCommandDetects runs a second COMMAND, of a higher epoch, while the
// first still runs, as two leaders would: the second must find the
// running lock taken (V), the first's next write must be refused by the
// fence (R), both must exit with ExitViolation, and Check must report
// both.
func TestCommandDetects(t *testing.T) {
	res := t.TempDir()
	first := startCommand(t, Spec{Res: res, Host: "A", Hold: 3 * time.Second}, 1)
	defer first.Process.Kill()
	waitLine(t, res, "S")
	second := startCommand(t, Spec{Res: res, Host: "B", Hold: 10 * time.Millisecond}, 2)
	if code := exitCode(t, second); code != ExitViolation {
		t.Errorf("second COMMAND exited %d, want %d (ExitViolation)", code, ExitViolation)
	}
	if code := exitCode(t, first); code != ExitViolation {
		t.Errorf("first COMMAND exited %d, want %d (ExitViolation)", code, ExitViolation)
	}
	_, found := check(t, res, Checks{})
	var overlap, refused bool
	for _, f := range found {
		overlap = overlap || strings.Contains(f, "two COMMANDs at once: running lock taken")
		refused = refused || strings.Contains(f, "write of a deposed term") && strings.Contains(f, "wrapper")
	}
	if !overlap || !refused {
		t.Errorf("Check found overlap %v, refused write %v, want both; it reported: %q", overlap, refused, found)
	}
}

// TestCommandClean runs COMMANDs one after the other: Check must find
// nothing wrong, and the terms in order.
func TestCommandClean(t *testing.T) {
	res := t.TempDir()
	for e := 1; e <= 3; e++ {
		if code := exitCode(t, startCommand(t, Spec{Res: res, Dir: "", Hold: 20 * time.Millisecond}, e)); code != 0 {
			t.Fatalf("COMMAND of epoch %d exited %d", e, code)
		}
	}
	terms, found := check(t, res, Checks{})
	if len(found) > 0 {
		t.Errorf("violations in a clean run: %q", found)
	}
	if len(terms) != 3 || terms[0].Epoch != 1 || terms[2].Epoch != 3 || terms[1].LastKind != "E" || terms[1].Host != "-" {
		t.Errorf("terms %+v, want epochs 1 to 3, each ending with E, host -", terms)
	}
}

// TestCheck feeds Check logs that break one rule each.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, log, want string
		restarts        bool
	}{
		{"epochs go down", "S 2 10 100 1 A\nE 2 10 110 1 A\nS 1 11 120 2 B\n", "epochs must increase", false},
		{"two wrappers in a term", "S 2 10 100 1 A\nT 2 11 110 2 B\n", "epoch 2 used by wrapper 1 on A and wrapper 2 on B", false},
		{"a second start", "S 2 10 100 1 A\nS 2 12 110 1 A\n", "a second COMMAND start in term 2", false},
		{"no start", "T 2 10 100 1 A\n", `begins with "T"`, false},
		{"time goes back", "S 2 10 100 1 A\nT 2 10 90 1 A\n", "time goes backwards", false},
		{"overlapping terms", "S 2 10 100 1 A\nT 2 10 200 1 A\nS 3 11 150 2 B\n", "term 3 starts before term 2's last write", false},
		{"garbage", "S 2 x\n", "cannot parse", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := t.TempDir()
			if err := os.WriteFile(filepath.Join(res, "log"), []byte(tc.log), 0o600); err != nil {
				t.Fatal(err)
			}
			_, found := check(t, res, Checks{Restarts: tc.restarts})
			if !strings.Contains(strings.Join(found, "\n"), tc.want) {
				t.Errorf("Check reported %q, want %q", found, tc.want)
			}
		})
	}
	// With --restart, a second start is a term's next COMMAND.
	res := t.TempDir()
	os.WriteFile(filepath.Join(res, "log"), []byte("S 2 10 100 1 -\nE 2 10 110 1 -\nS 2 12 120 1 -\nG 2 13 130 1 -\n"), 0o600)
	terms, found := check(t, res, Checks{Restarts: true})
	if len(found) > 0 || len(terms) != 1 || terms[0].Commands != 2 || !terms[0].Grandchild {
		t.Errorf("with restarts: terms %+v, violations %q; want one term of 2 COMMANDs with a grandchild", terms, found)
	}
}
