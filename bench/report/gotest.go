//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// benchResult is one benchmark line of `go test -bench`: its metrics by
// unit, or why it failed or was skipped.
type benchResult struct {
	metrics map[string]float64
	failed  string
}

// benchRun is the parsed output of one test binary run.
type benchRun struct {
	results map[string]*benchResult // by name without the -GOMAXPROCS suffix
	err     error
}

func (r *benchRun) get(name string) *benchResult {
	if r == nil || r.results == nil {
		return nil
	}
	return r.results[name]
}

// metric returns the metric of the named benchmark, if it ran.
func (r *benchRun) metric(name, unit string) (float64, bool) {
	res := r.get(name)
	if res == nil || res.failed != "" {
		return 0, false
	}
	v, ok := res.metrics[unit]
	return v, ok
}

// why says why name has no figures.
func (r *benchRun) why(name string) string {
	if r == nil {
		return "not run"
	}
	if res := r.get(name); res != nil && res.failed != "" {
		return res.failed
	}
	if r.err != nil {
		return r.err.Error()
	}
	return "no result"
}

// buildTest compiles the tests of pkg into dir and returns the binary.
func buildTest(ctx context.Context, root, pkg, dir string) (string, error) {
	bin := filepath.Join(dir, strings.ReplaceAll(strings.Trim(pkg, "./"), "/", "_")+".test")
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go test -c %s: %v: %s", pkg, err, firstLine(out))
	}
	return bin, nil
}

// runBench runs a compiled test binary's benchmarks matching re, echoing
// its output to stderr, within limit.
func runBench(ctx context.Context, bin, dir, re, benchtime string, limit time.Duration, env ...string) *benchRun {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run=^$", "-test.bench="+re, "-test.benchtime="+benchtime, "-test.timeout="+(limit+time.Minute).String())
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout = &teeWriter{&out}
	cmd.Stderr = os.Stderr
	err := cmd.Run()
	run := &benchRun{results: parseBench(out.Bytes())}
	if ctx.Err() != nil {
		run.err = fmt.Errorf("did not finish within %v", limit)
	} else if err != nil && len(run.results) == 0 {
		run.err = fmt.Errorf("%s: %v", filepath.Base(bin), err)
	}
	return run
}

type teeWriter struct{ b *bytes.Buffer }

func (t *teeWriter) Write(p []byte) (int, error) {
	os.Stderr.Write(p)
	return t.b.Write(p)
}

var (
	benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)
	failLine  = regexp.MustCompile(`^\s*--- (FAIL|SKIP): (Benchmark\S+)`)
)

// parseBench reads `go test -bench` output: metric lines, and FAIL/SKIP
// lines with the first message line under them.
func parseBench(out []byte) map[string]*benchResult {
	res := map[string]*benchResult{}
	var pending *benchResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if m := benchLine.FindStringSubmatch(line); m != nil {
			r := &benchResult{metrics: map[string]float64{}}
			f := strings.Fields(m[2])
			for i := 0; i+1 < len(f); i += 2 {
				if v, err := strconv.ParseFloat(f[i], 64); err == nil {
					r.metrics[f[i+1]] = v
				}
			}
			res[m[1]] = r
			pending = nil
			continue
		}
		if m := failLine.FindStringSubmatch(line); m != nil {
			name := strings.TrimSuffix(m[2], "-"+strconv.Itoa(gomaxprocs()))
			pending = &benchResult{failed: map[string]string{"FAIL": "failed", "SKIP": "skipped"}[m[1]]}
			if old, ok := res[name]; !ok || old.failed != "" {
				res[name] = pending
			}
			continue
		}
		if pending != nil && strings.HasPrefix(line, "    ") {
			msg := strings.TrimSpace(line)
			if _, after, ok := strings.Cut(msg, ": "); ok && strings.Contains(msg, ".go:") {
				msg = after
			}
			pending.failed += ": " + msg
			pending = nil
		}
	}
	return res
}

func gomaxprocs() int {
	if n, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err == nil {
		return n
	}
	return numCPU
}

// samples reads the raw samples a benchmark wrote (ns, one per line).
func samples(dir, file string) []float64 {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return nil
	}
	var out []float64
	for f := range strings.FieldsSeq(string(b)) {
		if v, err := strconv.ParseFloat(f, 64); err == nil {
			out = append(out, v)
		}
	}
	return out
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
