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
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/elect"
)

// cliChain: N command-line instances queue one after another behind a
// holder, which then releases; each runs its COMMAND once. leaderrun's
// instances are `leaderrun --name chain -- sh -c 'echo I >> order'`,
// flock(1)'s `flock F sh -c 'echo I >> order'`: the same shell, so the
// ratio is of the tools. Total: from the release to the last instance's
// exit. Order: COMMANDs that ran out of join order.
func (r *report) cliChain(ctx context.Context) error {
	bin, err := r.cli(ctx)
	if err != nil {
		return err
	}
	if _, err := exec.LookPath("flock"); err != nil {
		return errors.New("flock(1) not installed (Debian: util-linux)")
	}
	// Another build beside leaderrun (-base), and the processor time of each
	// chain's window where a cgroup v1 cpuacct hierarchy can be written.
	tools := []string{"leaderrun", "flock1"}
	bins := map[string]string{"leaderrun": bin, "flock1": "", "base": r.cfg.base}
	if r.cfg.base != "" {
		tools = append(tools, "base")
	}
	cpu := enterCPUAccounting()
	defer cpu.leave()
	t := newTable("N", "Tool", "total (median round)", "per handoff", "CPU per handoff", "out of order (all rounds)", "leaderrun ÷ tool", "per round", "load")
	var worst60, worst500 float64
	ok60, ok500 := false, false
	inversions := 0.0
	rounds := max(r.cfg.rounds, 1)
	for _, n := range []int{60, 500} {
		totals, cpus := map[string][]float64{}, map[string][]float64{}
		var ratios []string
		invN := map[string]int{}
		failed := false
		for round := range rounds {
			// Rotated: the first tool of one round is the last of the
			// next, so that none always runs on a machine that another
			// has just loaded.
			order := slices.Concat(tools[round%len(tools):], tools[:round%len(tools)])
			res := map[string]float64{}
			for _, tool := range order {
				total, used, inv, err := cliChainRun(ctx, tool, bins[tool], r.tmp, n, cpu)
				if err != nil {
					t.row(strconv.Itoa(n), toolNames[tool], "failed: "+err.Error(), "", "", "", "", "", "")
					failed = true
					break
				}
				res[tool] = total
				totals[tool] = append(totals[tool], total)
				cpus[tool] = append(cpus[tool], used/float64(n))
				invN[tool] += inv
			}
			if failed {
				break
			}
			ratios = append(ratios, fmt.Sprintf("%.2f×", res["leaderrun"]/res["flock1"]))
		}
		inversions += float64(invN["leaderrun"])
		q := math.NaN()
		if !failed {
			med := map[string]float64{}
			for _, tool := range tools {
				med[tool] = median(totals[tool])
			}
			q = med["leaderrun"] / med["flock1"]
			for _, tool := range tools {
				perRound := ""
				if tool == "leaderrun" {
					perRound = strings.Join(ratios, ", ")
				}
				cpuCell := "—"
				if cpu.ok() {
					cpuCell = dur(median(cpus[tool]))
				}
				t.row(strconv.Itoa(n), toolNames[tool], dur(med[tool]), dur(med[tool]/float64(n)), cpuCell, strconv.Itoa(invN[tool]), ratio(med["leaderrun"], med[tool]), perRound, loadNow())
			}
		}
		switch n {
		case 60:
			worst60, ok60 = q, !math.IsNaN(q)
		case 500:
			worst500, ok500 = q, !math.IsNaN(q)
		}
	}
	t.notef("N instances join one at a time behind a holder (each queued before the next starts), which then releases; total: the release → the last instance's exit, the median of %d rounds per tool, the tools' order rotated round by round; the ratio is of the medians, with each round's own (÷ flock(1)) beside it. CPU: the processor time of that window, every process in it and this report's own (a cgroup v1 cpuacct group; — where none can be made), per handoff, median round. leaderrun: `leaderrun --name chain -- sh -c 'echo I >> order'`; flock(1): `flock F sh -c 'echo I >> order'`; -base runs another leaderrun binary so too.", rounds)
	r.add("Planned handoff chain (CLI)", t)
	r.check("Chain N=60, CLI", "≤ 1.8× flock(1) (goal 1.5×)", fmt.Sprintf("%.2f×", worst60), worst60 <= 1.8, ok60)
	r.check("Chain N=500, CLI", "≤ 1.8× flock(1) (goal 1.5×)", fmt.Sprintf("%.2f×", worst500), worst500 <= 1.8, ok500)
	r.check("Chain CLI, order", "0 out of order", num(inversions), inversions == 0, ok60 || ok500)
	return nil
}

// median is the median (nearest rank) of s, which it leaves unsorted.
func median(s []float64) float64 {
	c := slices.Clone(s)
	slices.Sort(c)
	return pct(c, 50)
}

// cliChainRun runs one chain of tool, and returns its total, the processor
// time of the same window (cpu's), and its COMMANDs out of order.
func cliChainRun(ctx context.Context, tool, bin, tmp string, n int, cpu *cpuAcct) (total, used float64, inversions int, err error) {
	dir, err := os.MkdirTemp(tmp, "clichain-")
	if err != nil {
		return 0, 0, 0, err
	}
	order := filepath.Join(dir, "order")
	file := filepath.Join(dir, "flock1.lock")
	// The holder: the lock taken here, released below.
	var release func()
	var l *elect.Locker
	if tool != "flock1" {
		if l, err = elect.Open(elect.Config{Dir: dir}); err != nil {
			return 0, 0, 0, err
		}
		defer l.Close()
		lead, err := l.Acquire(ctx, "chain", elect.Request{})
		if err != nil {
			return 0, 0, 0, err
		}
		release = func() { lead.Release() }
	} else {
		f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return 0, 0, 0, err
		}
		defer f.Close()
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			return 0, 0, 0, err
		}
		release = func() { f.Close() }
	}
	var procs []*exec.Cmd
	defer func() {
		for _, c := range procs {
			if c.ProcessState == nil {
				unix.Kill(-c.Process.Pid, unix.SIGKILL)
				c.Wait()
			}
		}
	}()
	for i := range n {
		script := fmt.Sprintf("echo %d >> %s", i, order)
		argv := []string{"flock", file, "sh", "-c", script}
		if tool != "flock1" {
			argv = []string{bin, "--dir", dir, "--name", "chain", "--", "sh", "-c", script}
		}
		c := exec.CommandContext(ctx, argv[0], argv[1:]...)
		c.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			return 0, 0, 0, err
		}
		procs = append(procs, c)
		queued := func() bool { return blockedInFlock(c.Process.Pid) }
		if l != nil {
			queued = func() bool {
				s, err := l.Query(ctx, "chain")
				return err == nil && len(s.Pending) == i+1
			}
		}
		if err := until(queued, 30*time.Second); err != nil {
			return 0, 0, 0, fmt.Errorf("instance %d of %d not queued: %v", i+1, n, err)
		}
	}
	c0, t0 := cpu.now(), time.Now()
	release()
	for _, c := range procs {
		if err := c.Wait(); err != nil {
			return 0, 0, 0, fmt.Errorf("%s: %v", strings.Join(c.Args, " "), err)
		}
	}
	total, used = float64(time.Since(t0)), cpu.now()-c0
	b, err := os.ReadFile(order)
	if err != nil {
		return 0, 0, 0, err
	}
	prev := -1
	for _, f := range strings.Fields(string(b)) {
		i, _ := strconv.Atoi(f)
		if i < prev {
			inversions++
		}
		prev = i
	}
	return total, used, inversions, nil
}
