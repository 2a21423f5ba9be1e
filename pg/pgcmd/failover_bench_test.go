//go:build linux

package pgcmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/internal/backendtest"
	"github.com/leaderrun/leaderrun/pg"
	"github.com/leaderrun/leaderrun/pg/internal/pgtest"
)

// The CLI benchmarks run, over one PostgreSQL on loopback and, when etcd
// is installed, one etcd member on loopback, a leader on host A and a
// waiter on host B (two lock directories and --host names), end the
// leader's term in some way at t0, and measure t0 → the start of B's
// COMMAND, and whether A's COMMAND still ran then ("overlaps"), trial by
// trial interleaved across the kinds. Each COMMAND writes one line to a
// FIFO that the benchmark reads, so every kind pays the same sh start.
// p50-ms, p90-ms and max-ms of each kind, ratios of p50s and overlaps are
// reported. The peers:
//
//   - psql-advisory-lock: the usual recipe, `psql -c 'SELECT
//     pg_advisory_lock(K)' -c '\! COMMAND'`: the server frees the lock
//     when psql's connection closes, and nothing stops COMMAND.
//   - leaderrun-etcd: the same wrapper over etcd (built from ../../etcd,
//     or $LEADERRUN_ETCD_CLI), etcd from PATH or $LEADERRUN_ETCD_BIN;
//     left out, with a log line, when etcd is not installed.
//   - leaderrun-pg-before (BenchmarkCLIFailover): another build of
//     leaderrun-pg named by $LEADERRUN_PG_CLI_BEFORE, to compare two
//     versions in one run.

// BenchmarkCLIFailover: SIGKILL of the leading wrapper on a live host.
//
//   - leaderrun-pg, leaderrun-etcd: A's watchdog kills A's COMMAND and
//     ends the term at once (pg: over the connection it opened as the
//     term began; etcd: revokes the lease).
//   - leaderrun-pg-local-waiter, leaderrun-etcd-local-waiter: A's wrapper
//     and its watchdog are both SIGKILLed, COMMAND left running; another
//     wrapper waits on host A, behind B. It learns of the death from the
//     kernel (a pidfd of the leader, whose term marker is in its lock
//     directory), fences A's COMMAND and ends the term. The kill comes
//     once that waiter is ready (leaderrun-pg: its connection for ends of
//     sessions, which it opens and warms as it starts to wait, is idle).
//   - psql-advisory-lock: psql is SIGKILLed; its COMMAND runs on.
func BenchmarkCLIFailover(b *testing.B) {
	ws := benchWrappers(b, "15s")
	runTrials(b, ws, []trial{
		{"leaderrun-pg", "leaderrun-pg", wrapperOnly},
		{"leaderrun-pg-before", "leaderrun-pg-before", wrapperOnly},
		{"leaderrun-pg-local-waiter", "leaderrun-pg", wrapperAndWatchdog},
		{"psql-advisory-lock", "psql-advisory-lock", wrapperOnly},
		{"leaderrun-etcd", "leaderrun-etcd", wrapperOnly},
		{"leaderrun-etcd-local-waiter", "leaderrun-etcd", wrapperAndWatchdog},
	}, [][2]string{{"leaderrun-pg", "psql-advisory-lock"}, {"leaderrun-pg", "leaderrun-etcd"}, {"leaderrun-pg-local-waiter", "leaderrun-etcd-local-waiter"}, {"leaderrun-pg", "leaderrun-pg-before"}})
}

// BenchmarkCLIHostDead: the whole of host A dies: its wrapper, watchdog
// and COMMAND are SIGKILLed at once, so nobody on A ends the term and B
// waits for the lease to expire by the server's clock (--ttl 2s on both
// backends, the least either takes; --grace 0s). The figure to check is
// ≤ TTL + 1 s.
func BenchmarkCLIHostDead(b *testing.B) {
	ws := benchWrappers(b, "2s")
	runTrials(b, ws, []trial{
		{"leaderrun-pg-host-dead", "leaderrun-pg", wholeHost},
		{"leaderrun-etcd-host-dead", "leaderrun-etcd", wholeHost},
	}, [][2]string{{"leaderrun-pg-host-dead", "leaderrun-etcd-host-dead"}})
}

// BenchmarkCLIHandover: A's COMMAND ends (SIGKILL of COMMAND alone, the
// wrapper left to notice); A's wrapper releases its term and B's COMMAND
// starts. For psql, psql's \! returns, psql exits and the server frees
// the lock as the connection closes.
func BenchmarkCLIHandover(b *testing.B) {
	ws := benchWrappers(b, "15s")
	runTrials(b, ws, []trial{
		{"leaderrun-pg", "leaderrun-pg", commandExits},
		{"psql-advisory-lock", "psql-advisory-lock", commandExits},
		{"leaderrun-etcd", "leaderrun-etcd", commandExits},
	}, [][2]string{{"leaderrun-pg", "psql-advisory-lock"}, {"leaderrun-pg", "leaderrun-etcd"}})
}

// wrapper starts one contender of a kind, and counts those that wait for
// a name.
type wrapper struct {
	start  func(host, dir, name, cmdline string) *exec.Cmd
	queued func(ctx context.Context, name string) (int, error)
	// ready, if set, reports whether the waiter of pid is ready to end
	// a dead holder's term (leaderrun-pg: its connection for ends of
	// sessions, which it opens and warms as it starts to wait, is idle).
	ready func(ctx context.Context, pid int) (bool, error)
}

// trial is one kind of term end: the wrapper, and what is killed.
type trial struct {
	name, wrapper string
	kill          victims
}

// benchWrappers starts the servers and returns the wrappers that can run
// here (psql and leaderrun-etcd only when installed), with --ttl ttl.
func benchWrappers(b *testing.B, ttl string) map[string]wrapper {
	pgtest.Require(b)
	srv := pgtest.StartT(b)
	url := srv.URL()
	lk, err := pg.Open(pg.Config{URL: url, Schema: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lk.Close() })
	admin, err := pgx.Connect(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { admin.Close(context.Background()) })
	ws := map[string]wrapper{"leaderrun-pg": pgWrapper(cliBinary(b), url, "bench", ttl, queuedIn(lk), admin)}
	// Another build of leaderrun-pg, to compare two versions in one run,
	// in a schema of its own, which it creates: its functions are its
	// own (a Locker of this build would bring them to this revision, so
	// its queue is counted in SQL).
	if bin := os.Getenv("LEADERRUN_PG_CLI_BEFORE"); bin != "" {
		ws["leaderrun-pg-before"] = pgWrapper(bin, url, "bench_before", ttl, func(ctx context.Context, name string) (int, error) {
			var n int
			err := admin.QueryRow(ctx, "SELECT count(*) FROM bench_before.requests WHERE name = $1 AND epoch IS NULL", name).Scan(&n)
			return n, err
		}, admin)
	}
	if _, err := exec.LookPath("psql"); err == nil {
		ws["psql-advisory-lock"] = wrapper{
			start: func(host, dir, name, cmdline string) *exec.Cmd {
				return exec.Command("psql", url, "-X", "-q", "-c", "SELECT pg_advisory_lock(hashtext('"+name+"'))", "-c", `\! sh -c '`+cmdline+`'`)
			},
			queued: func(ctx context.Context, _ string) (int, error) {
				var n int
				err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").Scan(&n)
				return n, err
			},
		}
	} else {
		b.Log("psql not installed (Debian: postgresql-client): no psql-advisory-lock figures")
	}
	if ep, ok := startEtcd(b); ok {
		ws["leaderrun-etcd"] = etcdWrapper(etcdCLI(b), ep, ttl)
	}
	return ws
}

// queuedIn counts the waiters of a name in lk's schema.
func queuedIn(lk *pg.Locker) func(ctx context.Context, name string) (int, error) {
	return func(ctx context.Context, name string) (int, error) {
		s, err := lk.Query(ctx, name)
		return len(s.Pending), err
	}
}

// pgWrapper is leaderrun-pg at --ttl ttl in schema; queued counts the
// waiters of a name; admin, a connection of the benchmark's, sees the
// waiters' connections.
func pgWrapper(bin, url, schema, ttl string, queued func(ctx context.Context, name string) (int, error), admin *pgx.Conn) wrapper {
	return wrapper{
		start: func(host, dir, name, cmdline string) *exec.Cmd {
			return exec.Command(bin, "--pg-url", url, "--pg-schema", schema, "--ttl", ttl, "--grace", "0s",
				"--dir", dir, "--host", host, "--name", name, "--", "sh", "-c", cmdline)
		},
		queued: queued,
		ready: func(ctx context.Context, pid int) (bool, error) {
			// Its connection for ends of sessions open, and idle after
			// its warm-up (a transaction rolled back); its session's
			// connection idle (warmed); its watch of the blocker's
			// connection asleep on that connection's lock.
			var ok bool
			err := admin.QueryRow(ctx, `SELECT
				EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name LIKE $1 AND state = 'idle' AND query ILIKE 'rollback%')
				AND EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name LIKE $2 AND state = 'idle')
				AND EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name LIKE $3 AND state = 'active' AND wait_event_type = 'Lock')`,
				fmt.Sprintf("leaderrun end %% pid %d", pid), fmt.Sprintf("leaderrun session %% pid %d", pid), fmt.Sprintf("leaderrun watch %% pid %d", pid)).Scan(&ok)
			return ok, err
		},
	}
}

// etcdWrapper is leaderrun-etcd at --ttl ttl; it counts the waiters with
// its own status --json.
func etcdWrapper(bin, ep, ttl string) wrapper {
	args := []string{"--etcd-endpoints", ep, "--etcd-prefix", "/bench/", "--ttl", ttl}
	return wrapper{
		start: func(host, dir, name, cmdline string) *exec.Cmd {
			return exec.Command(bin, append(args, "--grace", "0s", "--dir", dir, "--host", host, "--name", name, "--", "sh", "-c", cmdline)...)
		},
		queued: func(ctx context.Context, name string) (int, error) {
			out, err := exec.CommandContext(ctx, bin, append(args, "status", name, "--json")...).Output()
			if err != nil {
				return 0, err
			}
			var s struct {
				Pending []json.RawMessage `json:"pending"`
			}
			err = json.Unmarshal(out, &s)
			return len(s.Pending), err
		},
	}
}

// runTrials runs each trial once per iteration, interleaved, and reports
// each one's p50, p90, max and overlaps, and the p50 ratios of the pairs
// (a trial whose wrapper cannot run here is left out).
func runTrials(b *testing.B, ws map[string]wrapper, trials []trial, ratios [][2]string) {
	var run []trial
	for _, t := range trials {
		if _, ok := ws[t.wrapper]; ok {
			run = append(run, t)
		}
	}
	gaps := map[string][]time.Duration{}
	overlaps := map[string]int{}
	for i := 0; b.Loop(); i++ {
		for _, t := range run {
			gap, overlap := failoverOnce(b, nil, ws[t.wrapper], t.kill, fmt.Sprintf("fo%d-%s", i, t.name))
			gaps[t.name] = append(gaps[t.name], gap)
			if overlap {
				overlaps[t.name]++
			}
		}
	}
	p50 := map[string]float64{}
	for _, t := range run {
		p50[t.name] = backendtest.Report(b, t.name+"-", gaps[t.name], overlaps[t.name])
	}
	for _, r := range ratios {
		if x, y := p50[r[0]], p50[r[1]]; x > 0 && y > 0 {
			b.ReportMetric(x/y, r[0]+"÷"+r[1])
		}
	}
}

// startEtcd starts one etcd member on loopback, its data in memory where
// /dev/shm is (as etcd's own tests do: PostgreSQL's runs with fsync off),
// and returns its client URL; false, with a log line, when etcd is not
// installed.
func startEtcd(b *testing.B) (string, bool) {
	bin := os.Getenv("LEADERRUN_ETCD_BIN")
	if bin == "" || bin == "embed" {
		p, err := exec.LookPath("etcd")
		if err != nil {
			b.Log("etcd not installed (Debian: etcd-server): no leaderrun-etcd figures")
			return "", false
		}
		bin = p
	}
	base := ""
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm"
	}
	dir, err := os.MkdirTemp(base, "leaderrun-pgbench-etcd-")
	if err != nil {
		b.Fatal(err)
	}
	client, peer := "http://"+freeAddr(b), "http://"+freeAddr(b)
	c := exec.Command(bin, "--name", "bench", "--data-dir", dir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "bench="+peer)
	if err := c.Start(); err != nil {
		os.RemoveAll(dir)
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c.Process.Kill()
		c.Wait()
		os.RemoveAll(dir)
	})
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(client, "http://"))
		if err == nil {
			conn.Close()
			return client, true
		}
		if time.Now().After(end) {
			b.Fatalf("etcd did not listen on %s within 20s", client)
		}
	}
}

// freeAddr is a free 127.0.0.1 port.
func freeAddr(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// etcdCLI is $LEADERRUN_ETCD_CLI, else leaderrun-etcd built from the etcd
// module next to this one.
func etcdCLI(b *testing.B) string {
	bin := os.Getenv("LEADERRUN_ETCD_CLI")
	if bin == "" {
		bin = filepath.Join(b.TempDir(), "leaderrun-etcd")
		c := exec.Command("go", "build", "-o", bin, "./cmd/leaderrun-etcd")
		c.Dir = "../../etcd"
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("go build leaderrun-etcd: %v: %s", err, out)
		}
	}
	return bin
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
	// the wrapper, its watchdog and COMMAND at once, as when the host dies
	wholeHost
	// COMMAND alone: it ends, and the wrapper releases the term
	commandExits
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
func failoverOnce(b testing.TB, admin *pgx.Conn, w wrapper, kill victims, name string) (time.Duration, bool) {
	start := w.start
	tmp := b.TempDir()
	fifo, lines := backendtest.FIFO(b)
	dirs := [2]string{filepath.Join(tmp, "A"), filepath.Join(tmp, "B")}
	for _, d := range dirs {
		os.Mkdir(d, 0o700)
	}
	a := start("A", dirs[0], name, "echo A $$ > "+fifo+"; exec sleep 100")
	if kill == watchdogHalfway {
		a.Env = append(os.Environ(), halfwayEnv)
	}
	backendtest.Start(b, a)
	defer backendtest.Reap(a)
	aCommand, _ := strconv.Atoi(strings.TrimPrefix(backendtest.Line(b, lines, 20*time.Second, "A's COMMAND did not start"), "A "))
	bw := start("B", dirs[1], name, "echo B > "+fifo)
	backendtest.Start(b, bw)
	defer backendtest.Reap(bw)
	waitQueued(b, w, name, 1)
	waitReady(b, w, bw.Process.Pid)
	var pids []int
	var halfway int // the process to kill once it stops half-way
	if kill == wrapperAndWatchdog || kill == localWaiterHalfway {
		a2 := start("A", dirs[0], name, "echo A2 > "+fifo)
		if kill == localWaiterHalfway {
			a2.Env = append(os.Environ(), halfwayEnv)
		}
		backendtest.Start(b, a2)
		defer backendtest.Reap(a2)
		if kill == localWaiterHalfway {
			halfway = a2.Process.Pid
		}
		waitQueued(b, w, name, 2)
		// The waiter on A follows the leader through the bus; the kill
		// must come after it sleeps on the leader's pidfd (cmd's
		// watchLocalHolder passes over a leader whose wrapper is already
		// gone when it looks).
		waitPidfd(b, a2.Process.Pid, a.Process.Pid)
		waitReady(b, w, a2.Process.Pid)
		kids := backendtest.ChildrenOf(a.Process.Pid) // the watchdog and COMMAND
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
	if kill == wholeHost {
		pids = append(pids, backendtest.ChildrenOf(a.Process.Pid)...) // the watchdog and COMMAND
	}
	if kill == watchdogHalfway {
		for _, k := range backendtest.ChildrenOf(a.Process.Pid) {
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
	if kill == commandExits {
		pids = []int{aCommand}
	} else {
		pids = append(pids, a.Process.Pid)
	}
	t0 := time.Now()
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if halfway != 0 {
		go killStopped(halfway)
	}
	l := backendtest.Line(b, lines, 30*time.Second, "B's COMMAND did not start")
	gap := time.Since(t0)
	if l != "B" {
		b.Fatalf("%q started after the failover, want B", l)
	}
	overlap := backendtest.Alive(aCommand)
	if aCommand > 1 {
		syscall.Kill(aCommand, syscall.SIGKILL) // psql's orphan
	}
	return gap, overlap
}

// waitReady waits until the waiter of pid is ready to end a dead
// holder's term (wrapper.ready): the trial measures a waiter that has
// waited a while, not one whose connections are still being opened.
func waitReady(b testing.TB, w wrapper, pid int) {
	if w.ready == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if ok, err := w.ready(ctx, pid); err == nil && ok {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	b.Fatalf("the waiter %d was not ready to end a dead holder's term within 20s", pid)
}

// waitQueued waits until n wait for name.
func waitQueued(b testing.TB, w wrapper, name string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if got, err := w.queued(ctx, name); err == nil && got == n {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	b.Fatalf("%d did not queue for %s within 20s", n, name)
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
