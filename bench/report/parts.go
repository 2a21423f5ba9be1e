//go:build linux

package main

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

var toolNames = map[string]string{
	"leaderrun":     "leaderrun",
	"leaderrun1000": "leaderrun, one process holding 1000 names",
	"flock2":        "raw flock(2) blocked waiter",
	"flock1":        "flock(1)",
	"base":          "leaderrun, the -base build",
	"gofrs10":       "gofrs/flock TryLockContext 10ms",
	"gofrs100":      "gofrs/flock TryLockContext 100ms",
}

func (r *report) electTest(ctx context.Context) (string, error) {
	if r.electBin == "" {
		bin, err := buildTest(ctx, r.root, "./elect", r.tmp)
		if err != nil {
			return "", err
		}
		r.electBin = bin
	}
	return r.electBin, nil
}

func (r *report) benchEnv() []string { return []string{"LEADERRUN_BENCH_OUT=" + r.samples} }

// failover: library crash failover (elect BenchmarkFailover).
func (r *report) failover(ctx context.Context) error {
	bin, err := r.electTest(ctx)
	if err != nil {
		return err
	}
	n := r.cfg.failoverN
	run := runBench(ctx, bin, r.tmp, "^BenchmarkFailover$", fmt.Sprintf("%dx", n), time.Duration(n)*time.Second+5*time.Minute, r.benchEnv()...)
	t := newTable("Tool", "p50", "p99", "mean", "leaderrun ÷ tool (p50)")
	ours := or(run.metric("BenchmarkFailover/leaderrun", "p50-ns"))
	for _, tool := range []string{"leaderrun", "flock2", "gofrs10", "gofrs100"} {
		name := "BenchmarkFailover/" + tool
		p50, ok := run.metric(name, "p50-ns")
		if !ok {
			t.row(toolNames[tool], run.why(name), "", "", "")
			continue
		}
		p99, _ := run.metric(name, "p99-ns")
		mean, _ := run.metric(name, "ns/op")
		t.row(toolNames[tool], dur(p50), dur(p99), dur(mean), ratio(ours, p50))
		r.series = append(r.series, series{"Crash failover (library)", toolNames[tool], samples(r.samples, "BenchmarkFailover_"+tool+".txt"), tool == "leaderrun"})
	}
	t.notef("SIGKILL of the leader → the waiter queued behind it holds the lock, %d times per tool (CLOCK_MONOTONIC across processes).", n)
	r.add("Crash failover (library)", t)
	flock2 := or(run.metric("BenchmarkFailover/flock2", "p50-ns"))
	r.check("Crash failover, library", "p50 ≤ 2× raw flock(2)", ratio(ours, flock2), ours <= 2*flock2, !math.IsNaN(ours+flock2))
	return nil
}

// chain: planned handoff through N contenders (elect BenchmarkChain).
func (r *report) chain(ctx context.Context) error {
	bin, err := r.electTest(ctx)
	if err != nil {
		return err
	}
	sizes := strings.Split(r.cfg.chain, ",")
	limit := time.Duration(len(sizes)*3)*(r.cfg.chainLimit+30*time.Second) + time.Minute
	env := append(r.benchEnv(), "LEADERRUN_BENCH_CHAIN="+r.cfg.chain, "LEADERRUN_BENCH_CHAIN_LIMIT="+r.cfg.chainLimit.String())
	run := runBench(ctx, bin, r.tmp, "^BenchmarkChain$", "1x", limit, append(env, r.exhaustEnv()...)...)
	t := newTable("N", "Tool", "total", "handoff p50", "handoff p99", "waiter CPU", "inversions", "holding inotify", "leaderrun ÷ tool (total)")
	for _, n := range sizes {
		ours := or(run.metric("BenchmarkChain/N="+n+"/leaderrun", "ns/op"))
		for _, tool := range []string{"leaderrun", "flock2", "gofrs10"} {
			name := "BenchmarkChain/N=" + n + "/" + tool
			total, ok := run.metric(name, "ns/op")
			if !ok {
				t.row(n, toolNames[tool], run.why(name), "", "", "", "", "", "")
				continue
			}
			g50, _ := run.metric(name, "gap-p50-ns")
			g99, _ := run.metric(name, "gap-p99-ns")
			cpu, _ := run.metric(name, "waiter-cpu-ms")
			inv, _ := run.metric(name, "inversions")
			sleeping := "—"
			if v, ok := run.metric(name, "inotify-waiters"); ok {
				sleeping = num(v) + " of " + n
				if spare, ok := run.metric(name, "inotify-spare-after-join"); ok {
					sleeping += map[bool]string{true: "; the user's last one still free", false: "; the user's last one taken"}[spare > 0]
				}
			}
			t.row(n, toolNames[tool], dur(total), dur(g50), dur(g99), dur(cpu*1e6), num(inv), sleeping, ratio(ours, total))
			if n == sizes[len(sizes)/2] {
				r.series = append(r.series, series{"Planned handoff, N=" + n + " (gap between grants)", toolNames[tool], samples(r.samples, "BenchmarkChain_N"+n+"_"+tool+"-gaps.txt"), tool == "leaderrun"})
			}
		}
	}
	t.notef("N contenders join one by one behind a holder, which releases; each leads once and releases at once. total: first release → last grant; handoff: gaps between consecutive grants; waiter CPU: rusage of all N children including their start-up (the same binary for every tool); inversions: pairs granted in the opposite order of joining; holding inotify: leaderrun waiters that hold an inotify instance (none should: they sleep on their predecessor's beacon)%s. One chain per row.", r.exhaustNote())
	r.add("Planned handoff chain"+r.exhaustTitle(), t)
	big := sizes[len(sizes)-1]
	ours := or(run.metric("BenchmarkChain/N="+big+"/leaderrun", "ns/op"))
	raw := or(run.metric("BenchmarkChain/N="+big+"/flock2", "ns/op"))
	inv := or(run.metric("BenchmarkChain/N="+big+"/leaderrun", "inversions"))
	r.check("Chain N="+big+", total time", "≤ 2× raw blocking flock(2) (goal 1.5×)", ratio(ours, raw), ours <= 2*raw, !math.IsNaN(ours+raw))
	r.check("Chain N="+big+", order", "0 inversions", num(inv), inv == 0, !math.IsNaN(inv))
	return nil
}

// idleCost: what a waiter costs while it waits (elect BenchmarkIdleWaiter).
func (r *report) idleCost(ctx context.Context) error {
	bin, err := r.electTest(ctx)
	if err != nil {
		return err
	}
	env := append(r.benchEnv(), "LEADERRUN_BENCH_IDLE="+r.cfg.idle.String())
	run := runBench(ctx, bin, r.tmp, "^BenchmarkIdleWaiter$", "1x", r.cfg.idle+3*time.Minute, append(env, r.exhaustEnv()...)...)
	t := newTable("Tool", "CPU ticks", "context switches", "RSS")
	for _, tool := range []string{"leaderrun", "leaderrun1000", "flock2", "flock1", "gofrs10", "gofrs100"} {
		name := "BenchmarkIdleWaiter/" + tool
		ticks, ok := run.metric(name, "cpu-ticks")
		if !ok {
			t.row(toolNames[tool], run.why(name), "", "")
			continue
		}
		sw, _ := run.metric(name, "ctx-switches")
		rss, _ := run.metric(name, "rss-kB")
		t.row(toolNames[tool], num(ticks), num(sw), fmt.Sprintf("%.1f MB", rss/1024))
	}
	t.notef("One waiter per tool queued behind a holder, and leaderrun1000: one process holding 1000 names, all side by side for %v: CPU clock ticks (utime+stime, 1 tick = 10 ms here), context switches of all its threads, resident memory.", r.cfg.idle)
	r.add(fmt.Sprintf("Idle waiter over %v%s", r.cfg.idle, r.exhaustTitle()), t)
	ticks, ok := run.metric("BenchmarkIdleWaiter/leaderrun", "cpu-ticks")
	r.check(fmt.Sprintf("Idle waiter, %v", r.cfg.idle), "0 CPU ticks", num(or(ticks, ok))+" ticks", ticks == 0, ok)
	many, ok := run.metric("BenchmarkIdleWaiter/leaderrun1000", "cpu-ticks")
	r.check(fmt.Sprintf("1000 names held by one process, %v", r.cfg.idle), "0 CPU ticks", num(or(many, ok))+" ticks", many == 0, ok)
	return nil
}

func (r *report) cli(ctx context.Context) (string, error) {
	if r.cliBin == "" && r.cliErr == nil {
		r.cliBin, r.cliErr = buildCLI(ctx, r.root, r.tmp)
	}
	return r.cliBin, r.cliErr
}

// cliFailover: `leaderrun --name x -- cmd` SIGKILLed → the next
// instance's command has started; peer flock(1).
func (r *report) cliFailover(ctx context.Context) error {
	bin, err := r.cli(ctx)
	if err != nil {
		return err
	}
	if _, err := exec.LookPath("flock"); err != nil {
		return errors.New("flock(1) not installed (Debian: util-linux)")
	}
	t := newTable("Tool", "p50", "p99", "leaderrun ÷ tool (p50)")
	res := map[string][]float64{}
	// Another build beside leaderrun (-base), in the same blocks.
	tools := []string{"leaderrun", "flock1"}
	bins := map[string]string{"leaderrun": bin, "base": r.cfg.base}
	if r.cfg.base != "" {
		tools = append(tools, "base")
	}
	// In blocks, the tools alternated (the order reversed in every second
	// block), so that a machine's drift over the part falls on all.
	blocks := min(max(r.cfg.rounds, 1), max(r.cfg.cliN, 1))
	for b := range blocks {
		n := r.cfg.cliN / blocks
		if b < r.cfg.cliN%blocks {
			n++
		}
		order := slices.Clone(tools)
		if b%2 == 1 {
			slices.Reverse(order)
		}
		for _, tool := range order {
			dir, err := os.MkdirTemp(r.tmp, "cli-")
			if err != nil {
				return err
			}
			lat, err := cliFailover(ctx, tool, bins[tool], dir, n)
			if err != nil {
				r.skip("cli failover "+tool, err.Error())
			}
			res[tool] = append(res[tool], lat...)
		}
	}
	for _, tool := range tools {
		slices.Sort(res[tool])
	}
	ours := pct(res["leaderrun"], 50)
	for _, tool := range tools {
		s := res[tool]
		if tool != "base" {
			r.series = append(r.series, series{"Crash failover (CLI): kill → next command started", toolNames[tool], s, tool == "leaderrun"})
		}
		t.row(toolNames[tool], dur(pct(s, 50)), dur(pct(s, 99)), ratio(ours, pct(s, 50)))
	}
	t.notef("`leaderrun --name x -- sh -c 'echo started; exec sleep 1000'`, leaderrun alone SIGKILLed (its command must not outlive it) → the queued next instance's command prints \"started\"; flock(1) runs the same command and is SIGKILLed with its process group (its command holds the lock too); -base runs another leaderrun binary so too. %d failovers per tool, in %d blocks with the tools alternated.", r.cfg.cliN, blocks)
	r.add("Crash failover (CLI)", t)
	peer := pct(res["flock1"], 50)
	r.check("Crash failover, CLI", "p50 ≤ 1.8× flock(1) (goal 1.5×)", ratio(ours, peer), ours <= 1.8*peer, !math.IsNaN(ours+peer))
	return nil
}

// startup: `leaderrun --name x -- true` vs `flock F true`, the Go floor
// (bench/gofloor: flock and os/exec, nothing else) and /bin/true.
func (r *report) startup(ctx context.Context) error {
	bin, err := r.cli(ctx)
	if err != nil {
		return err
	}
	floor, err := goBuild(ctx, r.root, "./bench/gofloor", filepath.Join(r.tmp, "gofloor"))
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(r.tmp, "startup-")
	if err != nil {
		return err
	}
	cmds := map[string][]string{
		"leaderrun": {bin, "--dir", dir, "--name", "x", "--", "true"},
		"flock1":    {"flock", filepath.Join(dir, "F"), "true"},
		"gofloor":   {floor, filepath.Join(dir, "G"), "true"},
		"true":      {"/bin/true"},
	}
	order := []string{"leaderrun", "flock1", "gofloor", "true"}
	// Another build beside it (-base: say, one of main before a change),
	// interleaved with the rest.
	if base := r.cfg.base; base != "" {
		cmds["base"] = []string{base, "--dir", dir, "--name", "x", "--", "true"}
		order = slices.Insert(order, 1, "base")
	}
	res, err := startup(ctx, cmds, order, r.cfg.startupN)
	if err != nil {
		return err
	}
	names := map[string]string{"leaderrun": "leaderrun --name x -- true", "base": "leaderrun --name x -- true, the -base build", "flock1": "flock F true", "gofloor": "gofloor F true", "true": "/bin/true"}
	t := newTable("Command", "p50", "mean", "p99", "leaderrun ÷ command (p50)")
	for _, tool := range order {
		slices.Sort(res[tool])
	}
	ours := pct(res["leaderrun"], 50)
	for _, tool := range order {
		s := res[tool]
		var sum float64
		for _, v := range s {
			sum += v
		}
		t.row("`"+names[tool]+"`", dur(pct(s, 50)), dur(sum/float64(max(len(s), 1))), dur(pct(s, 99)), ratio(ours, pct(s, 50)))
		if tool != "base" {
			r.series = append(r.series, series{"Start-up (fork, exec, wait)", names[tool], s, tool == "leaderrun"})
		}
	}
	t.notef("Wall time of fork+exec+wait, %d runs each, round-robin; an uncontended lock. The first row is the default `go build`, the one `go install` gives (%s). gofloor (bench/gofloor) is the least a Go program can do here: flock(2) and one os/exec spawn, nothing else; what it costs beyond flock(1) is the Go runtime's start on this machine, which no leaderrun in Go can avoid.", r.cfg.startupN, linkage(bin))
	r.add("Start-up", t)
	peer, floorP50 := pct(res["flock1"], 50), pct(res["gofloor"], 50)
	r.check("Start-up", "p50 ≤ 2× `flock F true` (goal 1.6×)", ratio(ours, peer), ours <= 2*peer, !math.IsNaN(ours+peer))
	r.figure("Start-up of the Go floor", "`gofloor F true` ÷ `flock F true`: what Go itself costs here", ratio(floorP50, peer), !math.IsNaN(floorP50+peer))
	r.figure("Start-up beside the Go floor", "leaderrun ÷ `gofloor F true`: what leaderrun adds to Go", ratio(ours, floorP50), !math.IsNaN(ours+floorP50))
	return nil
}

// bus: the bus package's own benchmarks beside its plain-socket fan-out.
func (r *report) bus(ctx context.Context) error {
	if out, err := exec.CommandContext(ctx, "git", "-C", r.root, "ls-files", "bus/bench_test.go").Output(); err == nil && len(out) == 0 {
		return errors.New("bus/bench_test.go is not committed yet")
	}
	bin, err := buildTest(ctx, r.root, "./bus", r.tmp)
	if err != nil {
		return err
	}
	run := runBench(ctx, bin, r.tmp, "^Benchmark(Latency|Throughput)$", r.cfg.busTime, 10*time.Minute)
	lt := newTable("K members", "plain socket p50", "bus p50", "bus ÷ plain")
	for _, k := range []string{"1", "10"} {
		p, okp := run.metric("BenchmarkLatency/plain/K="+k, "p50-ns")
		b, okb := run.metric("BenchmarkLatency/bus/K="+k, "p50-ns")
		lt.row(k, dur(or(p, okp)), dur(or(b, okb)), ratio(or(b, okb), or(p, okp)))
		r.check("Bus latency K="+k, "p50 ≤ 2× plain socket", ratio(or(b, okb), or(p, okp)), b <= 2*p, okp && okb)
	}
	lt.notef("Publish → delivered to every member, one message at a time (bus/bench_test.go BenchmarkLatency; it reports the median only).")
	r.add("Bus latency", lt)
	tt := newTable("K members", "plain socket deliveries/s", "bus deliveries/s", "bus ÷ plain")
	for _, k := range []string{"1", "10", "100"} {
		p, okp := run.metric("BenchmarkThroughput/plain/K="+k, "deliveries/s")
		b, okb := run.metric("BenchmarkThroughput/bus/K="+k, "deliveries/s")
		tt.row(k, num(math.Round(or(p, okp))), num(math.Round(or(b, okb))), ratio(or(b, okb), or(p, okp)))
		r.check("Bus throughput K="+k, "≥ 0.5× plain socket", ratio(or(b, okb), or(p, okp)), b >= 0.5*p, okp && okb)
	}
	tt.notef("Deliveries per second, windows of 256 messages (BenchmarkThroughput), -benchtime %s.", r.cfg.busTime)
	r.add("Bus throughput", tt)
	r.relearn(ctx, bin)
	return nil
}

// single: a later launch's whole single-instance Run (it finds the
// primary, hands over its arguments, reads the answer) beside a plain Unix
// socket's connect, request, reply and close, in three runs of
// instance/bench_test.go BenchmarkRoundTrip.
func (r *report) single(ctx context.Context) error {
	bin, err := buildTest(ctx, r.root, "./instance", r.tmp)
	if err != nil {
		return err
	}
	t := newTable("run", "plain socket connect+request+reply", "single-instance forward (Run)", "forward ÷ socket", "load")
	var worst float64
	ok := true
	for i := range 3 {
		run := runBench(ctx, bin, r.tmp, "^BenchmarkRoundTrip$/^launch-(run|unix-socket)$", r.cfg.singleTime, 5*time.Minute)
		f, okf := run.metric("BenchmarkRoundTrip/launch-run", "ns/op")
		p, okp := run.metric("BenchmarkRoundTrip/launch-unix-socket", "ns/op")
		ok = ok && okf && okp
		worst = max(worst, f/p)
		t.row(fmt.Sprint(i+1), dur(or(p, okp)), dur(or(f, okf)), ratio(or(f, okf), or(p, okp)), loadNow())
	}
	t.notef("Means of -benchtime %s each (BenchmarkRoundTrip/launch-run and /launch-unix-socket, in one process with the primary and the socket server).", r.cfg.singleTime)
	r.add("Single-instance forward", t)
	r.check("Single-instance forward", "≤ 4× socket connect+request+reply (goal 2×)", fmt.Sprintf("%.2f× (worst of 3)", worst), worst <= 4, ok)
	return nil
}

// relearn: how soon a member hears of the next leader after SIGKILL of
// the old one, beside the lock's own handover, in three runs.
func (r *report) relearn(ctx context.Context, bin string) {
	t := newTable("run", "lock handover p50", "member re-learns p50", "re-learn ÷ handover", "load")
	var worst float64
	ok := true
	for i := range 3 {
		run := runBench(ctx, bin, r.tmp, "^BenchmarkRelearn$", "40x", 5*time.Minute)
		h, okh := run.metric("BenchmarkRelearn", "handover-p50-ms")
		l, okl := run.metric("BenchmarkRelearn", "relearn-p50-ms")
		ok = ok && okh && okl
		worst = max(worst, l)
		ms := func(v float64) string { return dur(v * 1e6) }
		t.row(fmt.Sprint(i+1), ms(h), ms(l), ratio(l, h), loadNow())
	}
	t.notef("SIGKILL of the leading process → its successor's \"leading\" line (handover) and → the member's EventLeader for the new epoch (bus/relearn_bench_test.go BenchmarkRelearn, 40 kills a run).")
	r.add("Bus member re-learns the leader", t)
	r.check("Member re-learns the leader", "p50 ≤ 5ms after SIGKILL", dur(worst*1e6), worst <= 5, ok)
}

// exhaustEnv has the benchmarks hold all but one of the user's inotify
// instances, as a loaded desktop does, with -exhaust-inotify.
func (r *report) exhaustEnv() []string {
	if !r.cfg.exhaust {
		return nil
	}
	return []string{"LEADERRUN_BENCH_EXHAUST_INOTIFY=1"}
}

func (r *report) exhaustTitle() string {
	if !r.cfg.exhaust {
		return ""
	}
	return " (all but one of the user's inotify instances held by another process)"
}

func (r *report) exhaustNote() string {
	if !r.cfg.exhaust {
		return ""
	}
	return "; the benchmark process held all but one of the user's inotify instances (fs.inotify.max_user_instances) throughout, and checked after the waiters joined whether the last one was still free"
}

// linkage says whether bin is static: an ELF without a program
// interpreter is not loaded by ld.so.
func linkage(bin string) string {
	f, err := elf.Open(bin)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "dynamic: loaded by ld.so"
		}
	}
	return "static, no cgo"
}
