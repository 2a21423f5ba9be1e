package elect

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/layout"
	"github.com/leaderrun/leaderrun/internal/proctest"
)

// BenchmarkIdleWaiter: what a waiter costs while it waits. One waiter per
// tool queues behind a holder of the same tool; all wait side by side for
// LEADERRUN_BENCH_IDLE (10s is the figure of issue 5), and then each
// reports the CPU clock ticks it used in that window (utime+stime of
// /proc/PID/stat, all threads), its context switches (voluntary and not,
// summed over /proc/PID/task/*/status) and its RSS. flock1 is the
// flock(1) command waiting on a flock(2) holder. It is skipped unless
// LEADERRUN_BENCH_IDLE is set, since it sleeps that long.
func BenchmarkIdleWaiter(b *testing.B) {
	window, _ := time.ParseDuration(os.Getenv("LEADERRUN_BENCH_IDLE"))
	if window <= 0 {
		b.Skip("set LEADERRUN_BENCH_IDLE=10s to run; it waits that long")
	}
	flock1, err := exec.LookPath("flock")
	if err != nil {
		b.Logf("flock(1) not found; skipping it")
	}
	exhaustInotify(b)
	dir := b.TempDir()
	type idler struct {
		tool   string
		waiter *proctest.Proc
		before procCost
	}
	var idlers []*idler
	for _, tool := range append([]string{"leaderrun", "flock2", "flock1"}, benchTools[2:]...) {
		if tool == "flock1" && flock1 == "" {
			continue
		}
		holderTool := tool
		if tool == "flock1" {
			holderTool = "flock2"
		}
		holder := startBench(b, holderTool, dir, tool, true)
		if err := waitLed(holder); err != nil {
			b.Fatal(err)
		}
		var w *proctest.Proc
		if tool == "flock1" {
			w = proctest.Start(b, tool, exec.Command(flock1, layout.LockPath(dir, tool), "sh", "-c", "echo led"), proctest.Options{})
		} else {
			w = startBench(b, tool, dir, tool, true)
		}
		waitReady(b, w, tool, dir, tool, 2)
		idlers = append(idlers, &idler{tool: tool, waiter: w})
	}
	// One process holding 1000 names idles too.
	many := startBench(b, "leaderrun1000", dir, "many", true)
	if err := waitLed(many); err != nil {
		b.Fatal(err)
	}
	idlers = append(idlers, &idler{tool: "leaderrun1000", waiter: many})
	time.Sleep(100 * time.Millisecond) // let start-up work settle
	for _, i := range idlers {
		i.before = readCost(i.waiter.PID())
	}
	time.Sleep(window)
	for _, i := range idlers {
		after := readCost(i.waiter.PID())
		b.Run(i.tool, func(b *testing.B) {
			b.ReportMetric(float64(after.ticks-i.before.ticks), "cpu-ticks")
			b.ReportMetric(float64(after.switches-i.before.switches), "ctx-switches")
			b.ReportMetric(float64(after.rssKB), "rss-kB")
			b.ReportMetric(0, "ns/op")
		})
	}
}

type procCost struct {
	ticks    int64 // utime+stime, in clock ticks
	switches int64 // voluntary and involuntary, all threads
	rssKB    int64
}

func readCost(pid int) procCost {
	var c procCost
	p := "/proc/" + strconv.Itoa(pid)
	if b, err := os.ReadFile(p + "/stat"); err == nil {
		s := string(b)
		// Fields after "(comm) ": state is field 3, utime 14, stime 15.
		if i := strings.LastIndexByte(s, ')'); i >= 0 {
			f := strings.Fields(s[i+1:])
			if len(f) > 12 {
				u, _ := strconv.ParseInt(f[11], 10, 64)
				st, _ := strconv.ParseInt(f[12], 10, 64)
				c.ticks = u + st
			}
		}
	}
	tasks, _ := filepath.Glob(p + "/task/*/status")
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			n, _ := strconv.ParseInt(strings.Fields(v + " 0")[0], 10, 64)
			switch k {
			case "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches":
				c.switches += n
			case "VmRSS":
				c.rssKB = n
			}
		}
	}
	return c
}
