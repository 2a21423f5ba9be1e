package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkStartup times `leaderrun -n --dir D --name x true` against
// `flock F true`, interleaved run by run so that the machine's noise falls
// on both alike, and reports the medians of wall time and of CPU time
// (user+system from wait4, COMMAND included) and their ratios:
//
//	go test -run '^$' -bench Startup -benchtime 200x ./cmd
//
// The binary is built without tags, as go install builds it. With
// LEADERRUN_STARTUP_PEER naming another leaderrun binary (an earlier
// commit's, to compare a change with), that one runs interleaved too, and
// its medians and ratios to flock are reported as peer-*:
//
//	git archive COMMIT | tar -x -C /tmp/peer && (cd /tmp/peer && go build -o /tmp/leaderrun-peer .)
//	LEADERRUN_STARTUP_PEER=/tmp/leaderrun-peer go test -run '^$' -bench Startup -benchtime 300x ./cmd
func BenchmarkStartup(b *testing.B) {
	flock, err := exec.LookPath("flock")
	if err != nil {
		b.Skip("needs flock(1)")
	}
	tmp := b.TempDir()
	bin := filepath.Join(tmp, "leaderrun")
	build := exec.Command("go", "build", "-o", bin, "..")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	dir := filepath.Join(tmp, "locks")
	if err := os.Mkdir(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	cmds := [][]string{
		{bin, "-n", "--dir", dir, "--name", "x", "true"},
		{flock, filepath.Join(dir, "F"), "true"},
	}
	peer := os.Getenv("LEADERRUN_STARTUP_PEER")
	if peer != "" {
		cmds = append(cmds, []string{peer, "-n", "--dir", dir, "--name", "x", "true"})
	}
	wall := make([][]float64, len(cmds))
	cpu := make([][]float64, len(cmds))
	run := func(i int) {
		c := exec.Command(cmds[i][0], cmds[i][1:]...)
		t0 := time.Now()
		if err := c.Run(); err != nil {
			b.Fatalf("%v: %v", cmds[i], err)
		}
		wall[i] = append(wall[i], float64(time.Since(t0)))
		cpu[i] = append(cpu[i], float64(c.ProcessState.UserTime()+c.ProcessState.SystemTime()))
	}
	runAll := func() {
		for i := range cmds {
			run(i)
		}
	}
	for range 5 { // warm the page cache
		runAll()
	}
	for i := range cmds {
		wall[i], cpu[i] = nil, nil
	}
	b.ResetTimer()
	for b.Loop() {
		runAll()
	}
	b.StopTimer()
	med := func(s []float64) float64 {
		s = slices.Clone(s)
		slices.Sort(s)
		return s[len(s)/2]
	}
	b.ReportMetric(med(wall[0])/1e3, "leaderrun-wall-µs")
	b.ReportMetric(med(wall[1])/1e3, "flock-wall-µs")
	b.ReportMetric(med(wall[0])/med(wall[1]), "wall-ratio")
	b.ReportMetric(med(cpu[0])/1e3, "leaderrun-cpu-µs")
	b.ReportMetric(med(cpu[1])/1e3, "flock-cpu-µs")
	b.ReportMetric(med(cpu[0])/med(cpu[1]), "cpu-ratio")
	if peer != "" {
		b.ReportMetric(med(wall[2])/1e3, "peer-wall-µs")
		b.ReportMetric(med(wall[2])/med(wall[1]), "peer-wall-ratio")
		b.ReportMetric(med(cpu[2])/med(cpu[1]), "peer-cpu-ratio")
	}
}
