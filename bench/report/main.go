//go:build linux

// Command report measures leaderrun beside the tools it replaces, in one
// run on this machine, and prints a markdown table of medians, p99 and
// leaderrun/peer ratios (issue 5). It also writes the table to
// bench/out/report.md and a latency picture to bench/out/latency.svg and
// docs/latency.svg. Run it from the repository root:
//
//	go run ./bench/report
//
// Parts whose dependency is missing print "skipped: REASON" and the run
// goes on. See bench/README.md for what each figure means.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

var numCPU = runtime.NumCPU()

type config struct {
	failoverN, cliN, startupN int
	rounds                    int
	base                      string
	chain                     string
	chainLimit, idle          time.Duration
	busTime                   string
	singleTime                string
	out, docs                 string
	only                      string
	exhaust                   bool
}

func main() {
	var c config
	flag.IntVar(&c.failoverN, "failover", 100, "crash failovers per tool (library)")
	flag.IntVar(&c.cliN, "cli", 50, "crash failovers per tool (CLI)")
	flag.IntVar(&c.startupN, "startup", 200, "start-ups per tool")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds of each CLI chain, and blocks of the CLI failovers, alternated between leaderrun and flock(1) so that a machine's drift falls on both; each chain's figure is the tool's median round")
	flag.StringVar(&c.base, "base", "", "another leaderrun binary to time beside leaderrun in the start-up, CLI failover and CLI chain parts, interleaved (say, main's before a change)")
	flag.StringVar(&c.chain, "chain", "10,100,500", "handoff chain sizes")
	flag.DurationVar(&c.chainLimit, "chain-limit", 2*time.Minute, "give up on one chain after this long")
	flag.DurationVar(&c.idle, "idle", 10*time.Second, "idle waiter window")
	flag.BoolVar(&c.exhaust, "exhaust-inotify", false, "hold all but one of the user's inotify instances during the chain and idle parts, as a loaded desktop does")
	flag.StringVar(&c.busTime, "bus-benchtime", "1s", "-benchtime for the bus benchmarks")
	flag.StringVar(&c.singleTime, "single-benchtime", "2000x", "-benchtime for the single-instance forward")
	flag.StringVar(&c.out, "out", "bench/out", "output directory")
	flag.StringVar(&c.docs, "docs", "docs/latency.svg", "copy of the picture for the README (empty: none)")
	flag.StringVar(&c.only, "only", "", "comma-separated parts to run: failover,chain,idle,cli,clichain,startup,bus,single,etcd (default all)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, c)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	if !filepath.IsAbs(c.out) {
		c.out = filepath.Join(root, c.out)
	}
	if c.docs != "" && !filepath.IsAbs(c.docs) {
		c.docs = filepath.Join(root, c.docs)
	}
	samplesDir := filepath.Join(c.out, "samples")
	if err := os.MkdirAll(samplesDir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "leaderrun-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	r := &report{cfg: c, root: root, tmp: tmp, samples: samplesDir, rev: revision(root)}
	parts := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"failover", r.failover}, {"cli", r.cliFailover}, {"chain", r.chain}, {"idle", r.idleCost},
		{"clichain", r.cliChain}, {"bus", r.bus}, {"single", r.single}, {"startup", r.startup}, {"etcd", r.etcd},
	}
	for _, p := range parts {
		if c.only != "" && !strings.Contains(","+c.only+",", ","+p.name+",") {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintf(os.Stderr, "== %s\n", p.name)
		if err := p.fn(ctx); err != nil {
			r.skip(p.name, err.Error())
		}
	}
	md := r.markdown()
	fmt.Print(md)
	if err := os.WriteFile(filepath.Join(c.out, "report.md"), []byte(md), 0o644); err != nil {
		return err
	}
	svg := latencySVG(r.series)
	if err := os.WriteFile(filepath.Join(c.out, "latency.svg"), []byte(svg), 0o644); err != nil {
		return err
	}
	if c.docs != "" {
		if err := os.MkdirAll(filepath.Dir(c.docs), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(c.docs, []byte(svg), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "wrote %s, %s and %s\n", filepath.Join(c.out, "report.md"), filepath.Join(c.out, "latency.svg"), c.docs)
	return nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("run from inside the leaderrun module")
	}
	return filepath.Dir(mod), nil
}

// machine describes where the run happened.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel := "unknown kernel"
	ostype, err1 := os.ReadFile("/proc/sys/kernel/ostype")
	release, err2 := os.ReadFile("/proc/sys/kernel/osrelease")
	if err1 == nil && err2 == nil {
		kernel = strings.TrimSpace(string(ostype)) + " " + strings.TrimSpace(string(release))
	}
	inotify := "?"
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_instances"); err == nil {
		inotify = strings.TrimSpace(string(b))
	}
	load := "?"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return fmt.Sprintf("%d CPUs (nproc), %s, %s, %s, fs.inotify.max_user_instances %s, load average at the end %s, %s",
		numCPU, model, kernel, runtime.Version(), inotify, load, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
}

// revision names the code measured: the commit, and the files that
// differed from it in the work tree.
func revision(root string) string {
	head, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown revision"
	}
	rev := "commit " + strings.TrimSpace(string(head))
	out, _ := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", "*.go").Output()
	var dirty []string
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 1 {
			dirty = append(dirty, f[len(f)-1])
		}
	}
	if len(dirty) > 0 {
		rev += " plus uncommitted changes to " + strings.Join(dirty, ", ")
	}
	return rev
}
