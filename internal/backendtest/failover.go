//go:build unix

package backendtest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The pieces of the CLI failover benchmarks of leaderrun-etcd and
// leaderrun-pg: each COMMAND writes one line to a FIFO the benchmark
// reads, so every kind of wrapper pays the same sh start; each wrapper
// runs in a process group of its own, reaped at the end.

// FIFO makes a FIFO in a temporary directory of tb's and returns its path
// and the lines written to it.
func FIFO(tb testing.TB) (string, <-chan string) {
	fifo := filepath.Join(tb.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		tb.Fatal(err)
	}
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return fifo, lines
}

// Start starts c in a process group of its own; Reap ends it.
func Start(tb testing.TB, c *exec.Cmd) {
	if c.SysProcAttr == nil {
		c.SysProcAttr = &syscall.SysProcAttr{}
	}
	c.SysProcAttr.Setpgid = true
	if err := c.Start(); err != nil {
		tb.Fatal(err)
	}
}

// Line waits up to d for a line on lines; what it fails tb with says what.
func Line(tb testing.TB, lines <-chan string, d time.Duration, what string) string {
	select {
	case l := <-lines:
		return l
	case <-time.After(d):
		tb.Fatalf("%s within %v", what, d)
	}
	return ""
}

// ChildrenOf lists the children of pid (a wrapper's watchdog and
// COMMAND), which any of its threads may have started.
func ChildrenOf(pid int) []int {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	var out []int
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil && n > 1 {
				out = append(out, n)
			}
		}
	}
	return out
}

// Alive reports whether pid runs: not gone, not a zombie.
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// Reap ends what a wrapper started by Start left: its process group,
// then the wrapper.
func Reap(c *exec.Cmd) {
	if c.Process == nil || c.Process.Pid < 2 {
		return
	}
	syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	c.Process.Kill()
	c.Wait()
}

// Report reports one kind's gaps (sorted in place) as p50-ms, p90-ms,
// mean-ms and max-ms, and its overlaps, each metric named prefix+unit (""
// or "KIND-"), and returns the p50 in ms.
func Report(b *testing.B, prefix string, gaps []time.Duration, overlaps int) float64 {
	slices.Sort(gaps)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p50 := ms(gaps[len(gaps)/2])
	var sum time.Duration
	for _, g := range gaps {
		sum += g
	}
	b.ReportMetric(p50, prefix+"p50-ms")
	b.ReportMetric(ms(sum/time.Duration(len(gaps))), prefix+"mean-ms")
	b.ReportMetric(ms(gaps[len(gaps)*9/10]), prefix+"p90-ms")
	b.ReportMetric(ms(gaps[len(gaps)-1]), prefix+"max-ms")
	b.ReportMetric(float64(overlaps), prefix+"overlaps")
	return p50
}
