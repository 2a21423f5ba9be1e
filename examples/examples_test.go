// Package examples holds whole programs built on leaderrun's packages;
// this test builds and runs each one as its users would.
package examples

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func build(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build with")
	}
	if out, err := exec.Command(goTool, "build", "-o", bin, "./"+pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

func TestSingleInstance(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	bin := build(t, "singleinstance")
	dir := t.TempDir()
	os.Chmod(dir, 0o700)
	env := append(os.Environ(), "APP_LOCK_DIR="+dir)

	first := exec.CommandContext(ctx, bin, "first")
	first.Env = env
	out, err := first.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if first.ProcessState == nil && first.Process.Pid > 1 {
			first.Process.Kill()
			first.Wait()
		}
	}()
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.Contains(sc.Text(), `got ["first"]`) {
		t.Fatalf("first run said %q", sc.Text())
	}

	work := t.TempDir()
	second := exec.CommandContext(ctx, bin, "a b", "", "--x")
	second.Env, second.Dir = env, work
	var stdout bytes.Buffer
	second.Stdout = &stdout
	err = second.Run()
	want := fmt.Sprintf("pid %d got [\"a b\" \"\" \"--x\"] in %s\n", first.Process.Pid, work)
	if stdout.String() != want || second.ProcessState.ExitCode() != 3 {
		t.Fatalf("second run: %q, exit %d (%v); want %q, exit 3", stdout.String(), second.ProcessState.ExitCode(), err, want)
	}

	quit := exec.CommandContext(ctx, bin, "quit")
	quit.Env = env
	if b, err := quit.Output(); err == nil || !strings.Contains(string(b), "quit") {
		t.Fatalf("quit: %q, %v (want exit 1, the number of arguments)", b, err)
	}
	// The first run exits with its own invocation's code: one argument.
	if first.Wait(); first.ProcessState.ExitCode() != 1 {
		t.Fatalf("first run after quit: %v, want exit 1", first.ProcessState)
	}
}
