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
	return nil
}
