package clichaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/chaos"
)

// TestCLIChaosDetects checks TestCLIChaos's detector end to end: two
// leaderrun instances on one name but in two lock directories (two
// elections over one resource, as a misconfigured pair would be) both
// run their COMMAND; the second COMMAND must find the first's running
// lock taken, the first's next write must be refused by the fence, and
// chaos.Check must report both.
func TestCLIChaosDetects(t *testing.T) {
	tmp := t.TempDir()
	res := filepath.Join(tmp, "res")
	for _, d := range []string{res, filepath.Join(tmp, "a"), filepath.Join(tmp, "b")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	start := func(dir string, hold time.Duration) chan error {
		dir = filepath.Join(tmp, dir)
		c := exec.Command(chaos.Bin, "--dir", dir, "--name", "chaos", "--", self, "-test.run=^$")
		c.Env = chaos.Spec{Res: res, Dir: dir, Hold: hold}.Env()
		var out strings.Builder
		c.Stdout, c.Stderr = &out, &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		t.Cleanup(func() {
			c.Process.Kill()
			<-done
		})
		return done
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	first := start("a", 5*time.Second)
	if err := chaos.NewTail(res).Wait(ctx, func(l chaos.Line) bool { return l.Kind == "S" }); err != nil {
		t.Fatal(err)
	}
	second := start("b", 10*time.Millisecond)
	for _, done := range []chan error{second, first} {
		select {
		case <-done:
			done <- nil // for the cleanup
		case <-ctx.Done():
			t.Fatal("leaderrun did not exit within 20s")
		}
	}
	var found []string
	if _, err := chaos.Check(res, chaos.Checks{Violation: func(format string, args ...any) {
		found = append(found, fmt.Sprintf(format, args...))
	}}); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(found, "\n")
	if !strings.Contains(all, "two COMMANDs at once") || !strings.Contains(all, "write of a deposed term") {
		t.Errorf("two elections over one resource, and the check reported: %q; want two COMMANDs at once and a refused write", found)
	}
}
