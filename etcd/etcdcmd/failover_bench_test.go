//go:build linux

package etcdcmd_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/etcd"
	"github.com/leaderrun/leaderrun/etcd/internal/etcdtest"

	"github.com/leaderrun/leaderrun/internal/backendtest"
	"github.com/leaderrun/leaderrun/internal/proctest"
)

// BenchmarkCLIFailover measures, over one etcd member on loopback, the time
// from a SIGKILL of the leading wrapper on host A to the start of the
// waiting wrapper's COMMAND on host B (two lock directories and --host
// names), and whether A's COMMAND still ran then ("overlap"):
//
//   - leaderrun-etcd: A's watchdog kills A's COMMAND and revokes the lease
//     at once (a live host).
//   - leaderrun-etcd-local-waiter: A's wrapper and its watchdog are both
//     SIGKILLed, COMMAND left running; another wrapper waits on host A,
//     behind B. It learns of the death from the kernel (a pidfd of the
//     leader, whose term marker is in its lock directory), fences A's
//     COMMAND and revokes the lease.
//   - leaderrun-etcd-host-dead: A's wrapper, watchdog and COMMAND are all
//     SIGKILLed at once, as when the host dies: B waits for the lease to
//     expire (--ttl 2s).
//   - election-host-dead: the same death of a wrapper around etcd's own
//     concurrency.Election (a session of TTL 2, Campaign, then COMMAND; the
//     test binary in the election role), the peer of the previous case at
//     the same TTL.
//   - etcdctl-lock: `etcdctl lock --ttl 2 NAME COMMAND`, the peer, at the
//     same TTL; its COMMAND is not stopped when etcdctl dies.
//
// Each COMMAND writes one line to a FIFO that the benchmark reads, so both
// sides pay the same sh start. p50-ms and overlaps are reported.
func BenchmarkCLIFailover(b *testing.B) {
	etcdtest.Require(b)
	c := etcdtest.StartT(b, 1)
	ep := strings.Join(c.Endpoints(), ",")
	bin := cliBinary(b)
	lk, err := etcd.Open(etcd.Config{Endpoints: c.Endpoints(), Prefix: "/bench/"})
	if err != nil {
		b.Fatal(err)
	}
	defer lk.Close()
	// The TTL of every wrapper: 2s, or LEADERRUN_BENCH_FAILOVER_TTL
	// seconds (leaderrun-etcd's --grace is then TTL/2 - 1s).
	ttl, grace := 2, "0s"
	if n, err := strconv.Atoi(os.Getenv("LEADERRUN_BENCH_FAILOVER_TTL")); err == nil && n > 2 {
		ttl, grace = n, strconv.Itoa(n/2-1)+"s"
	}
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	wrappers := map[string]func(host, dir, name, cmdline string) *exec.Cmd{
		"leaderrun-etcd": func(host, dir, name, cmdline string) *exec.Cmd {
			return exec.Command(bin, "--etcd-endpoints", ep, "--etcd-prefix", "/bench/", "--ttl", strconv.Itoa(ttl)+"s", "--grace", grace,
				"--dir", dir, "--host", host, "--name", name, "--", "sh", "-c", cmdline)
		},
		"election": func(host, dir, name, cmdline string) *exec.Cmd {
			c := exec.Command(self)
			c.Env = append(os.Environ(), proctest.RoleEnv+"=election", "LEADERRUN_BENCH_TTL="+strconv.Itoa(ttl), "LEADERRUN_BENCH_ENDPOINTS="+ep,
				"LEADERRUN_BENCH_PREFIX=/bench/ctl/"+name, "LEADERRUN_BENCH_COMMAND="+cmdline)
			return c
		},
		"etcdctl-lock": func(host, dir, name, cmdline string) *exec.Cmd {
			return exec.Command("etcdctl", "--endpoints", ep, "lock", "--ttl", strconv.Itoa(ttl), "/bench/ctl/"+name, "--", "sh", "-c", cmdline)
		},
	}
	for _, tc := range []struct {
		name, wrapper string
		kill          victims
	}{
		{"leaderrun-etcd", "leaderrun-etcd", wrapperOnly},
		{"leaderrun-etcd-local-waiter", "leaderrun-etcd", wrapperAndWatchdog},
		{"leaderrun-etcd-host-dead", "leaderrun-etcd", wholeHost},
		{"election-host-dead", "election", wholeHost},
		{"etcdctl-lock", "etcdctl-lock", wrapperOnly},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if _, err := exec.LookPath("etcdctl"); err != nil && tc.wrapper == "etcdctl-lock" {
				b.Skip("etcdctl not installed (Debian: etcd-client)")
			}
			start := wrappers[tc.wrapper]
			var gaps []time.Duration
			overlaps := 0
			for i := 0; b.Loop(); i++ {
				gap, overlap := failoverOnce(b, lk, start, tc.wrapper != "leaderrun-etcd", tc.kill, "fo"+strconv.Itoa(i))
				gaps = append(gaps, gap)
				if overlap {
					overlaps++
				}
			}
			backendtest.Report(b, "", gaps, overlaps)
		})
	}
}

// victims says what of host A's leader a failover kills.
type victims int

const (
	wrapperOnly        victims = iota
	wrapperAndWatchdog         // with a second wrapper waiting on host A
	wholeHost                  // wrapper, watchdog and COMMAND
)

// cliBinary is $LEADERRUN_ETCD_CLI (bench/report builds it), else
// leaderrun-etcd built from this module, from the package directory go
// test runs in.
func cliBinary(tb testing.TB) string {
	bin := os.Getenv("LEADERRUN_ETCD_CLI")
	if bin == "" {
		bin = filepath.Join(tb.TempDir(), "leaderrun-etcd")
		if out, err := exec.Command("go", "build", "-o", bin, "../cmd/leaderrun-etcd").CombinedOutput(); err != nil {
			tb.Fatalf("go build: %v: %s", err, out)
		}
	}
	return bin
}

// failoverOnce runs one leader on host A and one waiter on host B, kills
// the leader, and returns the time until B's COMMAND started and whether
// A's COMMAND still ran then.
func failoverOnce(b testing.TB, lk *etcd.Locker, start func(host, dir, name, cmdline string) *exec.Cmd, peer bool, kill victims, name string) (time.Duration, bool) {
	tmp := b.TempDir()
	fifo, lines := backendtest.FIFO(b)
	dirs := [2]string{filepath.Join(tmp, "A"), filepath.Join(tmp, "B")}
	for _, d := range dirs {
		os.Mkdir(d, 0o700)
	}
	a := start("A", dirs[0], name, "echo A $$ > "+fifo+"; exec sleep 100")
	backendtest.Start(b, a)
	defer backendtest.Reap(a)
	aCommand, _ := strconv.Atoi(strings.TrimPrefix(backendtest.Line(b, lines, 20*time.Second, "A's COMMAND did not start"), "A "))
	if aCommand < 2 {
		b.Fatal("no pid from A's COMMAND")
	}
	bw := start("B", dirs[1], name, "echo B > "+fifo)
	backendtest.Start(b, bw)
	defer backendtest.Reap(bw)
	waitQueued(b, lk, peer, name, 1)
	if kill == wrapperAndWatchdog {
		a2 := start("A", dirs[0], name, "echo A2 > "+fifo)
		backendtest.Start(b, a2)
		defer backendtest.Reap(a2)
		waitQueued(b, lk, peer, name, 2)
	}
	var pids []int
	if kill != wrapperOnly {
		kids := backendtest.ChildrenOf(a.Process.Pid) // the watchdog and COMMAND
		if len(kids) < 2 && !peer || len(kids) < 1 {
			b.Fatalf("found %d children of the wrapper, want its watchdog and COMMAND", len(kids))
		}
		for _, k := range kids {
			if k != aCommand || kill == wholeHost {
				pids = append(pids, k)
			}
		}
	}
	pids = append(pids, a.Process.Pid)
	t0 := time.Now()
	for _, pid := range pids {
		if pid > 1 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	l := backendtest.Line(b, lines, 30*time.Second, "B's COMMAND did not start")
	gap := time.Since(t0)
	if l != "B" {
		b.Fatalf("%q started after the failover, want B, first in line", l)
	}
	overlap := backendtest.Alive(aCommand)
	if aCommand > 1 {
		syscall.Kill(aCommand, syscall.SIGKILL) // etcdctl's orphan
	}
	return gap, overlap
}

// waitQueued waits until n requests are queued behind A: in leaderrun's
// queue, or, for etcdctl lock, as keys under its lock prefix.
func waitQueued(b testing.TB, lk *etcd.Locker, peer bool, name string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if peer {
			r, err := lk.Client().Get(ctx, "/bench/ctl/"+name+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err == nil && r.Count == int64(n+1) {
				return
			}
		} else if s, err := lk.Query(ctx, name); err == nil && len(s.Pending) == n {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	b.Fatalf("%d waiters did not queue within 20s", n)
}
