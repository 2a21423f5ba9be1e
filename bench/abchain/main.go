// Command abchain times CLI hand-off chains of several builds (or flock(1))
// against one another, interleaved round by round, so that a noisy host's
// drift falls on every build alike: an A/B test of one change.
//
//	go run ./bench/abchain -n 60 -rounds 12 /tmp/lr-old /tmp/lr-new
//	go run ./bench/abchain -n 60 -rounds 4 "$(command -v flock)" /tmp/lr-new
//
// Each round of each binary: a holder (COMMAND: cat of a FIFO) and N
// instances of `sh -c 'echo I >> F'` queued behind it, one at a time
// (leaderrun: each ticket seen in the queue before the next starts;
// flock(1): 3 ms apart), then the holder released; the time from the
// release to the last instance's end, per hand-off. Where a cgroup v1
// cpuacct hierarchy is writable (-cpuacct), the processor time of the
// whole window, every process on the machine that is in it (the
// instances, their watchdogs and COMMANDs, and this harness, which reaps
// them), per hand-off too. It prints each binary's median round.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	n := flag.Int("n", 60, "instances queued behind the holder")
	rounds := flag.Int("rounds", 8, "rounds of each binary, interleaved")
	cpuacct := flag.String("cpuacct", "/sys/fs/cgroup/cpuacct", "cgroup v1 cpuacct hierarchy to count processor time in (empty: none)")
	flag.Parse()
	bins := flag.Args()
	if len(bins) == 0 {
		fmt.Fprintln(os.Stderr, "usage: abchain [-n N] [-rounds R] BINARY...")
		os.Exit(2)
	}
	cg := cpuGroup(*cpuacct)
	defer leave(*cpuacct, cg)
	wall := make([][]float64, len(bins))
	cpu := make([][]float64, len(bins))
	for range *rounds {
		for i, b := range bins {
			w, c, err := round(b, *n, cg)
			if err != nil {
				leave(*cpuacct, cg)
				fmt.Fprintln(os.Stderr, "abchain:", b, err)
				os.Exit(1)
			}
			wall[i], cpu[i] = append(wall[i], w), append(cpu[i], c)
		}
	}
	for i, b := range bins {
		line := fmt.Sprintf("%s: %.3f ms a hand-off (median of %d rounds", b, median(wall[i]), len(wall[i]))
		if cg != "" {
			line += fmt.Sprintf("), CPU %.3f ms a hand-off", median(cpu[i]))
		} else {
			line += ")"
		}
		fmt.Println(line)
	}
}

// cpuGroup moves this process into a cgroup of its own under the cpuacct
// hierarchy, so that its children are counted there, and returns its path
// ("" where that cannot be done).
func cpuGroup(root string) string {
	if root == "" {
		return ""
	}
	cg := filepath.Join(root, "leaderrun-abchain-"+strconv.Itoa(os.Getpid()))
	if os.Mkdir(cg, 0o755) != nil {
		return ""
	}
	if os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0) != nil {
		os.Remove(cg)
		return ""
	}
	return cg
}

// leave moves this process back to the hierarchy's root and removes cg.
func leave(root, cg string) {
	if cg != "" {
		os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
		os.Remove(cg)
	}
}

func usage(cg string) float64 {
	if cg == "" {
		return 0
	}
	b, _ := os.ReadFile(filepath.Join(cg, "cpuacct.usage"))
	v, _ := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	return v
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func tickets(q string) int {
	es, _ := os.ReadDir(q)
	k := 0
	for _, e := range es {
		if strings.HasPrefix(e.Name(), "t") && !strings.Contains(e.Name(), ".") {
			k++
		}
	}
	return k
}

// round runs one chain of bin and returns its wall and processor time a
// hand-off, in ms.
func round(bin string, n int, cg string) (wall, cpu float64, err error) {
	dir, err := os.MkdirTemp("", "abchain")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o700); err != nil {
		return 0, 0, err
	}
	isFlock := filepath.Base(bin) == "flock"
	args := func(c string) []string {
		if isFlock {
			return []string{filepath.Join(dir, "F"), "sh", "-c", c}
		}
		return []string{"--dir", dir, "--name", "chain", "--", "sh", "-c", c}
	}
	fifo, out := filepath.Join(dir, "release"), filepath.Join(dir, "order")
	if err := exec.Command("mkfifo", fifo).Run(); err != nil {
		return 0, 0, err
	}
	holder := exec.Command(bin, args("cat "+fifo+" >/dev/null")...)
	if err := holder.Start(); err != nil {
		return 0, 0, err
	}
	defer holder.Wait()
	q := filepath.Join(dir, "chain.queue")
	queued := func(k int) error {
		for deadline := time.Now().Add(20 * time.Second); !isFlock && tickets(q) < k; time.Sleep(200 * time.Microsecond) {
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d not queued", k-tickets(q), k)
			}
		}
		if isFlock {
			time.Sleep(3 * time.Millisecond)
		}
		return nil
	}
	if err := queued(1); err != nil {
		return 0, 0, err
	}
	cmds := make([]*exec.Cmd, n)
	for i := range cmds {
		cmds[i] = exec.Command(bin, args("echo I >> "+out)...)
		if err := cmds[i].Start(); err != nil {
			return 0, 0, err
		}
		if err := queued(i + 2); err != nil {
			return 0, 0, err
		}
	}
	time.Sleep(100 * time.Millisecond)
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		return 0, 0, err
	}
	u0, t0 := usage(cg), time.Now()
	f.Close()
	for _, c := range cmds {
		c.Wait()
	}
	d := time.Since(t0)
	u := usage(cg) - u0
	if b, _ := os.ReadFile(out); strings.Count(string(b), "I") != n {
		return 0, 0, fmt.Errorf("%d of %d COMMANDs ran", strings.Count(string(b), "I"), n)
	}
	return float64(d.Microseconds()) / 1000 / float64(n), u / 1e6 / float64(n), nil
}
