package elect

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

// Benchmarks of leaderrun beside the kernel primitive and a polling lock,
// in the same run, so that ratios survive a noisy machine. They measure
// with CLOCK_MONOTONIC across processes and report percentiles through
// b.ReportMetric; ns/op is overridden with the mean of what is measured,
// not the cost of the loop (which spawns processes). Nothing here asserts
// a time. With LEADERRUN_BENCH_OUT=DIR each benchmark also writes its raw
// samples (one per line, ns) to DIR/<benchmark name>.txt for bench/report.
//
//	go test ./elect -run '^$' -bench 'Failover|Chain' -benchtime 100x
//	LEADERRUN_BENCH_IDLE=10s go test ./elect -run '^$' -bench Idle

// BenchmarkFailover: the leader is SIGKILLed; how long until the waiter
// queued behind it holds the lock. Each waiter becomes the next leader.
func BenchmarkFailover(b *testing.B) {
	for _, tool := range benchTools {
		b.Run(tool, func(b *testing.B) { benchFailover(b, tool) })
	}
}

func benchFailover(b *testing.B, tool string) {
	dir, name := b.TempDir(), "failover"
	leader := startBench(b, tool, dir, name, true)
	if err := waitLed(leader); err != nil {
		b.Fatal(err)
	}
	// The kill lands at a random point of a polling tool's period, as a
	// crash would.
	period := 10 * time.Millisecond
	if tool == "gofrs100" {
		period = 100 * time.Millisecond
	}
	lat := make([]time.Duration, 0, b.N)
	for range b.N {
		waiter := startBench(b, tool, dir, name, true)
		waitReady(b, waiter, tool, dir, name, 2)
		time.Sleep(time.Millisecond + rand.N(period))
		t0 := monoNow()
		leader.Signal(syscall.SIGKILL)
		at, err := ledAt(waiter, proctest.Wait)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Duration(at-t0))
		leader.Kill()
		leader = waiter
	}
	leader.Kill()
	reportLatency(b, lat, "")
}

func waitLed(p *proctest.Proc) error {
	p.Expect("waiting")
	_, err := ledAt(p, proctest.Wait)
	return err
}

// BenchmarkChain: N contenders queue one after another behind a holder,
// which then releases; each leads once and releases at once. Reported:
// the total time from the first release to the last grant, the gaps
// between consecutive grants, the CPU of all waiters (rusage of the
// children, start-up included, which is the same binary for every tool),
// order inversions: pairs served in the opposite order of joining, and for
// leaderrun how many waiters sleep on inotify (the rest poll, see
// countInotify).
// LEADERRUN_BENCH_CHAIN=10,100 limits the sizes; a chain that takes longer
// than LEADERRUN_BENCH_CHAIN_LIMIT (default 2m) fails with how far it got.
func BenchmarkChain(b *testing.B) {
	sizes := []int{10, 100, 500}
	if s := os.Getenv("LEADERRUN_BENCH_CHAIN"); s != "" {
		sizes = nil
		for f := range strings.SplitSeq(s, ",") {
			if n, err := strconv.Atoi(f); err == nil {
				sizes = append(sizes, n)
			}
		}
	}
	for _, n := range sizes {
		for _, tool := range []string{"leaderrun", "flock2", "gofrs10"} {
			b.Run(fmt.Sprintf("N=%d/%s", n, tool), func(b *testing.B) { benchChain(b, tool, n) })
		}
	}
}

func benchChain(b *testing.B, tool string, n int) {
	limit := 2 * time.Minute
	if d, err := time.ParseDuration(os.Getenv("LEADERRUN_BENCH_CHAIN_LIMIT")); err == nil {
		limit = d
	}
	var totals, gaps []time.Duration
	var inversions, cpuNS, sleeping, free float64
	hog := exhaustInotify(b)
	for range b.N {
		deadline := time.Now().Add(limit)
		dir, name := b.TempDir(), "chain"
		release, err := benchAcquire(tool, dir, name)
		if err != nil {
			b.Fatal(err)
		}
		ps := joinChain(b, tool, dir, name, n, deadline, limit)
		if tool == "leaderrun" {
			pids := make([]int, n)
			for i, p := range ps {
				pids[i] = p.PID()
			}
			sleeping += float64(countInotify(pids))
			if hog != nil && hog.spare() {
				free++
			}
		}
		t0 := monoNow()
		release()
		at := make([]int64, n)
		for i, p := range ps {
			if at[i], err = ledAt(p, max(time.Until(deadline), time.Second)); err != nil {
				b.Fatalf("not done within %v (LEADERRUN_BENCH_CHAIN_LIMIT): %d of %d led: %v", limit, i, n, err)
			}
		}
		for _, p := range ps {
			p.Wait()
			cpuNS += float64(cpu(p))
		}
		totals, gaps = appendChainTimes(totals, gaps, t0, at)
		inversions += float64(countInversions(at))
	}
	ops := float64(b.N)
	b.ReportMetric(inversions/ops, "inversions")
	if tool == "leaderrun" {
		b.ReportMetric(sleeping/ops, "inotify-waiters")
		if hog != nil {
			b.ReportMetric(free/ops, "inotify-spare-after-join")
		}
	}
	b.ReportMetric(cpuNS/ops/1e6, "waiter-cpu-ms")
	writeSamples(b, "", totals)
	writeSamples(b, "-gaps", gaps)
	slices.Sort(gaps)
	b.ReportMetric(float64(percentile(gaps, 50)), "gap-p50-ns")
	b.ReportMetric(float64(percentile(gaps, 99)), "gap-p99-ns")
	b.ReportMetric(float64(mean(totals)), "ns/op")
}

// joinChain starts n bench children of tool one after another, each once
// the previous one waits, failing b if they have not all joined by
// deadline.
func joinChain(b *testing.B, tool, dir, name string, n int, deadline time.Time, limit time.Duration) []*proctest.Proc {
	b.Helper()
	ps := make([]*proctest.Proc, n)
	for i := range ps {
		ps[i] = startBench(b, tool, dir, name, false)
		waitReady(b, ps[i], tool, dir, name, i+2)
		if time.Now().After(deadline) {
			b.Fatalf("not done within %v (LEADERRUN_BENCH_CHAIN_LIMIT): only %d of %d joined", limit, i+1, n)
		}
	}
	return ps
}

// appendChainTimes appends to totals the time from t0 (the release) to
// the last grant of at, and to gaps the times between consecutive grants.
func appendChainTimes(totals, gaps []time.Duration, t0 int64, at []int64) ([]time.Duration, []time.Duration) {
	sorted := slices.Clone(at)
	slices.Sort(sorted)
	totals = append(totals, time.Duration(sorted[len(sorted)-1]-t0))
	prev := t0
	for _, t := range sorted {
		gaps = append(gaps, time.Duration(t-prev))
		prev = t
	}
	return totals, gaps
}

// countInotify counts the processes that hold an inotify instance: none
// should (waiting sleeps on beacons).
func countInotify(pids []int) int {
	n := 0
	for _, pid := range pids {
		fds, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
		for _, fd := range fds {
			if l, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name()); l == "anon_inode:inotify" {
				n++
				break
			}
		}
	}
	return n
}

// countInversions counts pairs i < j (join order) with at[j] < at[i].
func countInversions(at []int64) int {
	n := 0
	for i := range at {
		for j := i + 1; j < len(at); j++ {
			if at[j] < at[i] {
				n++
			}
		}
	}
	return n
}

func reportLatency(b *testing.B, lat []time.Duration, suffix string) {
	writeSamples(b, suffix, lat)
	s := slices.Clone(lat)
	slices.Sort(s)
	b.ReportMetric(float64(percentile(s, 50)), "p50-ns")
	b.ReportMetric(float64(percentile(s, 99)), "p99-ns")
	b.ReportMetric(float64(mean(s)), "ns/op")
}

// percentile is the nearest-rank p-th percentile of sorted s.
func percentile(s []time.Duration, p int) time.Duration {
	if len(s) == 0 {
		return 0
	}
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}

func mean(s []time.Duration) time.Duration {
	if len(s) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return sum / time.Duration(len(s))
}

// writeSamples keeps the raw samples for bench/report when asked to.
func writeSamples(b *testing.B, suffix string, s []time.Duration) {
	out := os.Getenv("LEADERRUN_BENCH_OUT")
	if out == "" || len(s) == 0 {
		return
	}
	var sb strings.Builder
	for _, d := range s {
		fmt.Fprintln(&sb, int64(d))
	}
	file := strings.NewReplacer("/", "_", "=", "").Replace(b.Name()) + suffix + ".txt"
	if err := os.WriteFile(filepath.Join(out, file), []byte(sb.String()), 0o644); err != nil {
		b.Error(err)
	}
}
