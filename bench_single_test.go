package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkSecondLaunch times, trial by trial, the whole of a second
// launch of `leaderrun --single-instance` (start, forward, answer, exit)
// beside `leaderrun -n` failing against a held name, the cheapest thing
// leaderrun does with a held name. It reports each one's mean wall time
// and their ratio.
//
//	go test -run '^$' -bench SecondLaunch -benchtime 200x .
func BenchmarkSecondLaunch(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "leaderrun")
	goTool, err := exec.LookPath("go")
	if err != nil {
		b.Skip("no go command to build with")
	}
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	dir := b.TempDir()
	os.Chmod(dir, 0o700)
	env := append(os.Environ(), "LEADERRUN_DIR="+dir)
	start := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if cmd.Process.Pid > 1 {
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
		if !bufio.NewScanner(out).Scan() {
			b.Fatalf("%v said nothing", args)
		}
		return cmd
	}
	// A primary that answers every invocation at once, and a plain holder.
	start("--single-instance", "--name", "app", "--", "sh", "-c",
		`echo up; while IFS= read -r line <&3; do id=${line#*\"id\":\"}; id=${id%%\"*}; printf '{"id":"%s","exit":0}\n' "$id" >&4; done`)
	start("--name", "held", "--", "sh", "-c", "echo up; exec sleep 600")

	run := func(want int, args ...string) time.Duration {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		t0 := time.Now()
		err := cmd.Run()
		d := time.Since(t0)
		if code := cmd.ProcessState.ExitCode(); code != want {
			b.Fatalf("%s: exit %d (%v), want %d", strings.Join(args, " "), code, err, want)
		}
		return d
	}
	var single, nonblock time.Duration
	for b.Loop() {
		single += run(0, "--single-instance", "--name", "app", "--", "sh", "x")
		nonblock += run(75, "-n", "--name", "held", "--", "true")
	}
	n := time.Duration(b.N)
	b.ReportMetric(float64((single / n).Microseconds()), "single-µs")
	b.ReportMetric(float64((nonblock / n).Microseconds()), "nonblock-µs")
	b.ReportMetric(float64(single)/float64(nonblock), "ratio")
}
