//go:build linux

package pgcmd_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/pg"
	"github.com/leaderrun/leaderrun/pg/internal/pgtest"
)

// BenchmarkCLIFailover measures, over one PostgreSQL on loopback, the time
// from a SIGKILL of the leading wrapper on host A to the start of the
// waiting wrapper's COMMAND on host B (two lock directories and --host
// names), and whether A's COMMAND still ran then ("overlaps"), trial by
// trial interleaved:
//
//   - leaderrun-pg: A's watchdog kills A's COMMAND and ends the term's
//     session at once (a live host).
//   - leaderrun-pg-local-waiter: A's wrapper and its watchdog are both
//     SIGKILLed, COMMAND left running; another wrapper waits on host A,
//     behind B. It learns of the death from the kernel (a pidfd of the
//     leader, whose term marker is in its lock directory), fences A's
//     COMMAND and ends the term's session.
//   - psql-advisory-lock: the usual recipe, `psql -c 'SELECT
//     pg_advisory_lock(K)' -c '\! COMMAND'`: the server frees the lock
//     when the killed psql's connection closes, and nothing stops A's
//     COMMAND.
//
// Each COMMAND writes one line to a FIFO that the benchmark reads, so both
// sides pay the same sh start. p50-ms, p90-ms and max-ms of each, the
// ratio of the p50s and the overlaps of each are reported.
func BenchmarkCLIFailover(b *testing.B) {
	pgtest.Require(b)
	if _, err := exec.LookPath("psql"); err != nil {
		b.Skip("psql not installed (Debian: postgresql-client)")
	}
	srv := pgtest.StartT(b)
	bin := cliBinary(b)
	url := srv.URL()
	lk, err := pg.Open(pg.Config{URL: url, Schema: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer lk.Close()
	admin, err := pgx.Connect(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(context.Background())
	wrappers := map[string]func(host, dir, name, cmdline string) *exec.Cmd{
		"leaderrun-pg": func(host, dir, name, cmdline string) *exec.Cmd {
			return exec.Command(bin, "--pg-url", url, "--pg-schema", "bench", "--ttl", "15s", "--grace", "0s",
				"--dir", dir, "--host", host, "--name", name, "--", "sh", "-c", cmdline)
		},
		"psql-advisory-lock": func(host, dir, name, cmdline string) *exec.Cmd {
			return exec.Command("psql", url, "-X", "-q", "-c", "SELECT pg_advisory_lock(hashtext('"+name+"'))", "-c", `\! sh -c '`+cmdline+`'`)
		},
	}
	names := []string{"leaderrun-pg", "leaderrun-pg-local-waiter", "psql-advisory-lock"}
	wrappers["leaderrun-pg-local-waiter"] = wrappers["leaderrun-pg"]
	kills := map[string]victims{"leaderrun-pg-local-waiter": wrapperAndWatchdog}
	gaps := map[string][]time.Duration{}
	overlaps := map[string]int{}
	for i := 0; b.Loop(); i++ {
		for _, n := range names {
			gap, overlap := failoverOnce(b, lk, admin, wrappers[n], n == "psql-advisory-lock", kills[n], fmt.Sprintf("fo%d-%s", i, n))
			gaps[n] = append(gaps[n], gap)
			if overlap {
				overlaps[n]++
			}
		}
	}
	p50 := map[string]float64{}
	for _, n := range names {
		ds := gaps[n]
		slices.Sort(ds)
		p50[n] = float64(ds[len(ds)/2].Microseconds()) / 1000
		b.ReportMetric(p50[n], n+"-p50-ms")
		b.ReportMetric(float64(ds[len(ds)*9/10].Microseconds())/1000, n+"-p90-ms")
		b.ReportMetric(float64(ds[len(ds)-1].Microseconds())/1000, n+"-max-ms")
		b.ReportMetric(float64(overlaps[n]), n+"-overlaps")
	}
	b.ReportMetric(p50["leaderrun-pg"]/p50["psql-advisory-lock"], "ratio")
}

// cliBinary is $LEADERRUN_PG_CLI, else leaderrun-pg built from this
// module.
func cliBinary(tb testing.TB) string {
	bin := os.Getenv("LEADERRUN_PG_CLI")
	if bin == "" {
		bin = filepath.Join(tb.TempDir(), "leaderrun-pg")
		if out, err := exec.Command("go", "build", "-o", bin, "../cmd/leaderrun-pg").CombinedOutput(); err != nil {
			tb.Fatalf("go build: %v: %s", err, out)
		}
	}
	return bin
}

// victims says what of host A's leader a failover kills.
type victims int

const (
	wrapperOnly        victims = iota
	wrapperAndWatchdog         // with a second wrapper waiting on host A
	// the wrapper, once the server has ended the connection its watchdog
	// opened ahead to end the term (pg_terminate_backend)
	wrapperEndConnGone
	// the wrapper, then its watchdog once it has done the first of ending
	// the term and removing its marker (TEST_LEADERRUN_FENCE=halfway
	// stops it there)
	watchdogHalfway
	// as wrapperAndWatchdog, then the waiter on host A once it has done
	// the first of ending the term and removing its marker
	localWaiterHalfway
)

// halfwayEnv stops a wrapper, or the watchdog it starts, between the end
// of a dead term and the removal of its marker (see cmd's stopHalfway).
const halfwayEnv = "TEST_LEADERRUN_FENCE=halfway"

// failoverOnce runs one leader on host A and one waiter on host B, kills
// the leader's wrapper (and its watchdog, with a second waiter on host A,
// as kill says), and returns the time until B's COMMAND started and
// whether A's COMMAND still ran then.
func failoverOnce(b testing.TB, lk *pg.Locker, admin *pgx.Conn, start func(host, dir, name, cmdline string) *exec.Cmd, peer bool, kill victims, name string) (time.Duration, bool) {
	tmp := b.TempDir()
	fifo := filepath.Join(tmp, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		b.Fatal(err)
	}
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	dirs := [2]string{filepath.Join(tmp, "A"), filepath.Join(tmp, "B")}
	for _, d := range dirs {
		os.Mkdir(d, 0o700)
	}
	a := start("A", dirs[0], name, "echo A $$ > "+fifo+"; exec sleep 100")
	if kill == watchdogHalfway {
		a.Env = append(os.Environ(), halfwayEnv)
	}
	a.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := a.Start(); err != nil {
		b.Fatal(err)
	}
	defer reap(a)
	var aCommand int
	select {
	case l := <-lines:
		aCommand, _ = strconv.Atoi(strings.TrimPrefix(l, "A "))
	case <-time.After(20 * time.Second):
		b.Fatal("A's COMMAND did not start within 20s")
	}
	bw := start("B", dirs[1], name, "echo B > "+fifo)
	bw.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := bw.Start(); err != nil {
		b.Fatal(err)
	}
	defer reap(bw)
	waitQueued(b, lk, admin, peer, name, 1)
	var pids []int
	var halfway int // the process to kill once it stops half-way
	if kill == wrapperAndWatchdog || kill == localWaiterHalfway {
		a2 := start("A", dirs[0], name, "echo A2 > "+fifo)
		if kill == localWaiterHalfway {
			a2.Env = append(os.Environ(), halfwayEnv)
		}
		a2.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := a2.Start(); err != nil {
			b.Fatal(err)
		}
		defer reap(a2)
		if kill == localWaiterHalfway {
			halfway = a2.Process.Pid
		}
		waitQueued(b, lk, admin, peer, name, 2)
		// The waiter on A follows the leader through the bus; the kill
		// must come after it sleeps on the leader's pidfd (cmd's
		// watchLocalHolder passes over a leader whose wrapper is already
		// gone when it looks).
		waitPidfd(b, a2.Process.Pid, a.Process.Pid)
		kids := childrenOf(a.Process.Pid) // the watchdog and COMMAND
		if len(kids) < 2 {
			b.Fatalf("found %d children of the wrapper, want its watchdog and COMMAND", len(kids))
		}
		for _, k := range kids {
			if k != aCommand {
				pids = append(pids, k)
			}
		}
	}
	if kill == wrapperEndConnGone {
		endEndConn(b, admin)
	}
	if kill == watchdogHalfway {
		for _, k := range childrenOf(a.Process.Pid) {
			if k != aCommand {
				halfway = k
			}
		}
		if halfway == 0 {
			b.Fatal("found no watchdog among the wrapper's children")
		}
	}
	// The wrapper last: a watchdog that saw it die first would begin its
	// work (it fences COMMAND, ends the term, then removes the marker) and
	// be killed part-way.
	pids = append(pids, a.Process.Pid)
	t0 := time.Now()
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if halfway != 0 {
		go killStopped(halfway)
	}
	var gap time.Duration
	select {
	case l := <-lines:
		gap = time.Since(t0)
		if l != "B" {
			b.Fatalf("%q started after the failover, want B", l)
		}
	case <-time.After(30 * time.Second):
		b.Fatal("B's COMMAND did not start within 30s")
	}
	overlap := alive(aCommand)
	if aCommand > 1 {
		syscall.Kill(aCommand, syscall.SIGKILL) // psql's orphan
	}
	return gap, overlap
}

// waitQueued waits until B waits: in leaderrun's queue, or blocked on the
// advisory lock.
func waitQueued(b testing.TB, lk *pg.Locker, admin *pgx.Conn, peer bool, name string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if peer {
			var got int
			if admin.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").Scan(&got) == nil && got == n {
				return
			}
		} else if s, err := lk.Query(ctx, name); err == nil && len(s.Pending) == n {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	b.Fatal("the waiter did not queue within 20s")
}

// killStopped SIGKILLs pid once it has stopped (state T), within 20s.
func killStopped(pid int) {
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 && i+2 < len(s) && (s[i+2] == 'T' || s[i+2] == 't') {
			syscall.Kill(pid, syscall.SIGKILL)
			return
		}
	}
}

// endEndConn ends, with pg_terminate_backend, the connection that the
// leader's watchdog opened to end its term, once it is open (the only
// watchdog running).
func endEndConn(b testing.TB, admin *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		var n int
		err := admin.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name LIKE $1", "leaderrun end %").Scan(&n)
		if err != nil {
			b.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Fatal("the leader's watchdog opened no connection to end its term within 20s")
}

// waitPidfd waits until process pid holds a pidfd of target.
func waitPidfd(b testing.TB, pid, target int) {
	deadline := time.Now().Add(20 * time.Second)
	dir := "/proc/" + strconv.Itoa(pid)
	want := "Pid:\t" + strconv.Itoa(target) + "\n"
	for time.Now().Before(deadline) {
		fds, _ := os.ReadDir(dir + "/fd")
		for _, fd := range fds {
			if l, _ := os.Readlink(dir + "/fd/" + fd.Name()); l != "anon_inode:[pidfd]" {
				continue
			}
			if info, _ := os.ReadFile(dir + "/fdinfo/" + fd.Name()); strings.Contains(string(info), want) {
				return
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	b.Fatalf("process %d holds no pidfd of %d within 20s", pid, target)
}

// childrenOf lists the children of pid (its watchdog and COMMAND), which
// any of its threads may have started.
func childrenOf(pid int) []int {
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

// alive reports whether pid runs: not gone, not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// reap ends what a wrapper left: its process group, then the wrapper.
func reap(c *exec.Cmd) {
	if c.Process == nil || c.Process.Pid < 2 {
		return
	}
	syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	c.Process.Kill()
	c.Wait()
}
