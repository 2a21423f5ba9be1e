//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// etcd: the etcd backend (module etcd/) beside etcd's own recipes,
// concurrency.Election and concurrency.Mutex, from that module's
// benchmarks against one etcd they start; each benchmark is run etcdRuns
// times, interleaved, and the median of the runs is shown.
func (r *report) etcd(ctx context.Context) error {
	bin := os.Getenv("LEADERRUN_ETCD_BIN")
	if bin == "" {
		if p, err := exec.LookPath("etcd"); err == nil {
			bin = p
		}
	}
	if bin == "" {
		return errors.New("etcd not installed (Debian: apt-get install etcd-server, or set LEADERRUN_ETCD_BIN); no etcd figures")
	}
	test := filepath.Join(r.tmp, "etcd.test")
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", test, ".")
	cmd.Dir = filepath.Join(r.root, "etcd")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go test -c in etcd/: %v: %s", err, firstLine(out))
	}
	const etcdRuns = 3
	var fast, crash []*benchRun
	for range etcdRuns {
		fast = append(fast, runBench(ctx, test, r.tmp, "^Benchmark(Handover|AcquireRelease)$", "200x", 10*time.Minute))
		crash = append(crash, runBench(ctx, test, r.tmp, "^BenchmarkCrashFailover$", "2x", 5*time.Minute))
	}
	median := func(runs []*benchRun, name, unit string) float64 {
		var v []float64
		for _, run := range runs {
			if x, ok := run.metric(name, unit); ok {
				v = append(v, x)
			}
		}
		if len(v) == 0 {
			return math.NaN()
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	recipes := []string{"leaderrun", "concurrency.Election", "concurrency.Mutex"}

	ht := newTable("Recipe", "mean", "p50", "p99", "leaderrun ÷ recipe (p50)", "leaderrun ÷ recipe (mean)")
	ours50, oursMean := median(fast, "BenchmarkHandover/leaderrun", "p50-ns"), median(fast, "BenchmarkHandover/leaderrun", "ns/op")
	for _, rc := range recipes {
		n := "BenchmarkHandover/" + rc
		p50, mean := median(fast, n, "p50-ns"), median(fast, n, "ns/op")
		ht.row(rc, dur(mean), dur(p50), dur(median(fast, n, "p99-ns")), ratio(ours50, p50), ratio(oursMean, mean))
	}
	ht.notef("Two contenders with sessions of their own take turns, each holding 3 ms so that the other is queued when it releases, 200 terms per run, median of %d runs; p50/p99 from the release call to the next holder's grant (etcd/bench_test.go BenchmarkHandover). leaderrun's release grants the successor in its own txn; the recipes' waiters watch from a revision in the past, which etcd serves from a sweep every 100 ms.", etcdRuns)
	r.add("etcd: release → next holder", ht)
	el50 := median(fast, "BenchmarkHandover/concurrency.Election", "p50-ns")
	r.check("etcd handover", "p50 ≤ 1.2× concurrency.Election", ratio(ours50, el50), ours50 <= 1.2*el50, !math.IsNaN(ours50+el50))

	at := newTable("Recipe", "Acquire+Release", "÷ concurrency.Election")
	el := median(fast, "BenchmarkAcquireRelease/concurrency.Election", "ns/op")
	for _, rc := range []string{"leaderrun", "leaderrun-ifavailable", "concurrency.Election", "concurrency.Mutex"} {
		v := median(fast, "BenchmarkAcquireRelease/"+rc, "ns/op")
		at.row(rc, dur(v), ratio(v, el))
	}
	at.notef("One contender alone, 200 round trips per run, median of %d runs (BenchmarkAcquireRelease).", etcdRuns)
	r.add("etcd: uncontended Acquire + Release", at)

	ct := newTable("Recipe", "p50", "leaderrun ÷ recipe")
	oursCrash := median(crash, "BenchmarkCrashFailover/leaderrun", "p50-ns")
	for _, rc := range recipes[:2] {
		v := median(crash, "BenchmarkCrashFailover/"+rc, "p50-ns")
		ct.row(rc, dur(v), ratio(oursCrash, v))
	}
	ct.notef("The holder's host dies (no renewal, no revoke), TTL 2 s on both sides: time until the waiter is granted; bounded below by the TTL and etcd's expiry sweep (BenchmarkCrashFailover, 2 per run, %d runs).", etcdRuns)
	r.add("etcd: crash failover, same TTL", ct)
	elCrash := median(crash, "BenchmarkCrashFailover/concurrency.Election", "p50-ns")
	r.check("etcd crash failover", "≤ 1.2× concurrency.Election at the same TTL", ratio(oursCrash, elCrash), oursCrash <= 1.2*elCrash, !math.IsNaN(oursCrash+elCrash))
	return r.etcdCLI(ctx, median)
}

// etcdCLI: leaderrun-etcd's failover after a SIGKILL of the leading
// wrapper, beside etcdctl lock (etcd/etcdcmd BenchmarkCLIFailover).
func (r *report) etcdCLI(ctx context.Context, median func([]*benchRun, string, string) float64) error {
	test, cli := filepath.Join(r.tmp, "etcdcmd.test"), filepath.Join(r.tmp, "leaderrun-etcd")
	for _, args := range [][]string{{"test", "-c", "-o", test, "./etcdcmd"}, {"build", "-o", cli, "./cmd/leaderrun-etcd"}} {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = filepath.Join(r.root, "etcd")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s in etcd/: %v: %s", args[0], err, firstLine(out))
		}
	}
	const runs = 3
	var fo []*benchRun
	for range runs {
		fo = append(fo, runBench(ctx, test, r.tmp, "^BenchmarkCLIFailover$", "3x", 5*time.Minute, "LEADERRUN_ETCD_CLI="+cli))
	}
	t := newTable("Wrapper, what died", "p50", "÷ etcdctl lock", "old COMMAND still ran")
	peer := median(fo, "BenchmarkCLIFailover/etcdctl-lock", "p50-ms")
	live := median(fo, "BenchmarkCLIFailover/leaderrun-etcd", "p50-ms")
	for _, c := range []struct{ name, label string }{
		{"leaderrun-etcd", "leaderrun-etcd, the wrapper (SIGKILL; host alive)"},
		{"leaderrun-etcd-local-waiter", "leaderrun-etcd, the wrapper and its watchdog; another waits on host A"},
		{"leaderrun-etcd-host-dead", "leaderrun-etcd, the host (wrapper, watchdog, COMMAND)"},
		{"election-host-dead", "a wrapper around concurrency.Election (session TTL 2), the host"},
		{"etcdctl-lock", "etcdctl lock, etcdctl (SIGKILL)"},
	} {
		v := median(fo, "BenchmarkCLIFailover/"+c.name, "p50-ms")
		t.row(c.label, dur(v*1e6), ratio(v, peer), fmt.Sprintf("%.0f of %d", median(fo, "BenchmarkCLIFailover/"+c.name, "overlaps"), 3))
	}
	t.notef("The leading wrapper on host A is SIGKILLed while a wrapper of host B waits (two lock directories and --host names, one etcd member, --ttl 2s, --grace 0s; etcdctl lock --ttl 2): time until B's COMMAND starts, median of %d runs of 3. leaderrun-etcd's watchdog kills A's COMMAND and revokes the lease at once; with the watchdog killed too, a wrapper waiting on host A learns of the death from a pidfd, fences A's COMMAND (left running on purpose) and revokes; a dead host's lease expires after the TTL; etcdctl lock leaves its COMMAND running. consul lock documents the same TTL wait (session TTL, plus a 15 s lock-delay by default) and also leaves its child running after losing the lock (hashicorp/consul#9788).", runs)
	r.add("etcd: CLI crash failover (across hosts)", t)
	r.check("etcd CLI failover, live host", "next COMMAND ≤ 100 ms after the SIGKILL", fmt.Sprintf("%.1f ms", live), live <= 100, !math.IsNaN(live))
	local := median(fo, "BenchmarkCLIFailover/leaderrun-etcd-local-waiter", "p50-ms")
	r.check("etcd CLI failover, local waiter", "next COMMAND ≤ 100 ms after the SIGKILL of wrapper and watchdog", fmt.Sprintf("%.1f ms", local), local <= 100, !math.IsNaN(local))
	dead := median(fo, "BenchmarkCLIFailover/leaderrun-etcd-host-dead", "p50-ms")
	r.check("etcd CLI failover, dead host", "≤ TTL + 1 s (3 s)", fmt.Sprintf("%.0f ms", dead), dead <= 3000, !math.IsNaN(dead))
	elect := median(fo, "BenchmarkCLIFailover/election-host-dead", "p50-ms")
	r.check("etcd CLI failover, dead host, beside concurrency.Election", "≤ 1.1× concurrency.Election at the same TTL, same run", fmt.Sprintf("%.2f×", dead/elect), dead <= 1.1*elect, !math.IsNaN(dead) && !math.IsNaN(elect))
	return nil
}
