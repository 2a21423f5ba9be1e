//go:build linux

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	drv "github.com/leaderrun/leaderrun/internal/chaos"
	"github.com/leaderrun/leaderrun/internal/proctest"
	"github.com/leaderrun/leaderrun/pg/internal/pgtest"
)

// duration is how long faults are injected: $LEADERRUN_PG_CHAOS_DURATION,
// default 15s (CI); 10m for the soak.
func duration() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("LEADERRUN_PG_CHAOS_DURATION")); err == nil && d > 0 {
		return d
	}
	return 15 * time.Second
}

// TestPgChaos runs two leaderrun-pg wrappers on each of three simulated
// hosts (a lock directory and a --host name each) for one name, each
// started again when it exits, while faults are drawn every 100-500ms:
// SIGKILL of a wrapper (its watchdog must stop COMMAND and end the
// session), SIGSTOP of a wrapper for 0.5-5s (its watchdog must stop
// COMMAND by the term's deadline), pg_terminate_backend of a random
// leaderrun session, and, rarely, an immediate restart of the server or a
// SIGSTOP of the whole server for 1-4s (past the 3s TTL). COMMAND is the
// test binary in the COMMAND role of internal/chaos: it ticks in a fenced
// log for 200ms. Afterwards it checks what chaos.Check checks (no V line:
// two COMMANDs at once, 0 overlaps; no write of a deposed term refused by
// the fence; epochs strictly growing from term to term; one wrapper a
// term), that a COMMAND runs within 20s once the faults stop (no stall),
// and that no process of the run is left. Exits are reported by code.
func TestPgChaos(t *testing.T) {
	if overlaps := runChaos(t, duration(), false); overlaps != 0 {
		t.Errorf("%d overlaps", overlaps)
	}
}

// TestPgChaosDetects checks the detector itself: the same run without
// faults, but with each host in a schema of its own (three elections
// instead of one, as a misconfigured fleet would have), must find
// COMMANDs that ran at once.
func TestPgChaosDetects(t *testing.T) {
	if overlaps := runChaos(t, 3*time.Second, true); overlaps == 0 {
		t.Fatal("three elections at once over one resource, and the detector found no overlap")
	}
}

// runChaos runs the wrappers for d, with faults unless split (each host
// then elects in a schema of its own), and returns the overlaps found.
// Violations other than overlaps fail t.
func runChaos(t *testing.T, d time.Duration, split bool) int {
	if testing.Short() {
		t.Skip("multi-process chaos over PostgreSQL; skipped with -short")
	}
	srv := pgtest.StartT(t)
	run := t.TempDir()
	bin := drv.Bin // see TestMain
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, faults for %v", seed, d)
	rng := rand.New(rand.NewPCG(seed, 1))

	type wrapper struct {
		host string
		mu   sync.Mutex
		cmd  *exec.Cmd
	}
	var ws []*wrapper
	for _, h := range []string{"A", "B", "C"} {
		if err := os.Mkdir(filepath.Join(run, h), 0o700); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, &wrapper{host: h}, &wrapper{host: h})
	}
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var exitsMu sync.Mutex
	exits := map[string]int{}
	for _, w := range ws {
		wg.Go(func() {
			for ctx.Err() == nil {
				schema := "chaos"
				if split {
					schema += strings.ToLower(w.host)
				}
				c := exec.Command(bin, "--pg-url", srv.URL(), "--pg-schema", schema, "--ttl", "3s", "--grace", "500ms",
					"--dir", filepath.Join(run, w.host), "--host", w.host, "--name", "chaos", "--", self, "-test.run=^$")
				c.Env = drv.Spec{Res: run, Host: w.host, Hold: 200 * time.Millisecond, Tick: 5 * time.Millisecond}.Env()
				c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				var stderr strings.Builder
				c.Stderr = &stderr
				c.WaitDelay = time.Second // a COMMAND left behind holds the pipe
				if err := c.Start(); err != nil {
					t.Error(err)
					return
				}
				w.mu.Lock()
				w.cmd = c
				w.mu.Unlock()
				c.Wait()
				code := strconv.Itoa(c.ProcessState.ExitCode())
				if ws, ok := c.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					code = "signal " + ws.Signal().String()
				}
				exitsMu.Lock()
				exits[code]++
				exitsMu.Unlock()
				switch code {
				case "0", "69", "80", "143", "signal killed":
				case strconv.Itoa(drv.ExitViolation):
					if !split {
						t.Logf("host %s: exit %s: COMMAND saw a violation (see the log check)", w.host, code)
					}
				default:
					// Not a fault's expected end: say why.
					t.Logf("host %s: exit %s: %s", w.host, code, lastLine(stderr.String()))
				}
				if code == "69" {
					// The server is away (a restart): start again soon,
					// not in a hot loop.
					time.Sleep(100 * time.Millisecond)
				}
				w.mu.Lock()
				w.cmd = nil
				w.mu.Unlock()
			}
		})
	}
	admin := func() *pgx.Conn {
		c, err := pgx.Connect(context.Background(), srv.SocketURL(pgtest.Superuser, pgtest.Database))
		if err != nil {
			return nil
		}
		return c
	}
	faults := map[string]int{}
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		if split {
			continue
		}
		w := ws[rng.IntN(len(ws))]
		w.mu.Lock()
		c := w.cmd
		w.mu.Unlock()
		switch f := rng.IntN(100); {
		case f < 35 && c != nil:
			c.Process.Signal(syscall.SIGKILL)
			faults["sigkill wrapper"]++
		case f < 60 && c != nil:
			c.Process.Signal(syscall.SIGSTOP)
			faults["sigstop wrapper"]++
			d := time.Duration(500+rng.IntN(4500)) * time.Millisecond
			time.AfterFunc(d, func() { c.Process.Signal(syscall.SIGCONT) })
		case f < 90:
			if a := admin(); a != nil {
				a.Exec(context.Background(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'leaderrun session%' ORDER BY random() LIMIT 1")
				a.Close(context.Background())
				faults["pg_terminate_backend"]++
			}
		case f < 95:
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			faults["server restart"]++
		default:
			srv.Signal(syscall.SIGSTOP)
			time.Sleep(time.Duration(1000+rng.IntN(3000)) * time.Millisecond)
			srv.Signal(syscall.SIGCONT)
			faults["server stopped"]++
		}
	}
	// Every stopped wrapper runs again; then a COMMAND must start soon.
	for _, w := range ws {
		w.mu.Lock()
		if w.cmd != nil {
			w.cmd.Process.Signal(syscall.SIGCONT)
		}
		w.mu.Unlock()
	}
	calm := time.Now()
	before := starts(t, run)
	deadline := time.Now().Add(20 * time.Second)
	for starts(t, run) == before {
		if time.Now().After(deadline) {
			t.Errorf("no COMMAND started within 20s after the faults stopped (stall)")
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	liveness := time.Since(calm)
	stop()
	for _, w := range ws {
		w.mu.Lock()
		if w.cmd != nil {
			w.cmd.Process.Signal(syscall.SIGCONT)
			w.cmd.Process.Signal(syscall.SIGTERM)
		}
		w.mu.Unlock()
	}
	wg.Wait()
	proctest.ReapOrphans()
	// Nothing of the run is left: no COMMAND, no watchdog.
	gone := time.Now().Add(10 * time.Second)
	for {
		left := proctest.WithEnv(drv.Marker(run))
		if len(left) == 0 {
			break
		}
		if time.Now().After(gone) {
			t.Errorf("left running after the run: %s", proctest.Describe(left, func(proctest.Leftover) string { return "" }))
			for _, p := range left {
				syscall.Kill(p.PID, syscall.SIGKILL)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
		proctest.ReapOrphans()
	}

	b, err := os.ReadFile(filepath.Join(run, "log"))
	if err != nil {
		t.Fatal(err)
	}
	var overlaps, commands int
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for _, ln := range lines {
		switch f := strings.Fields(ln); {
		case len(f) == 0:
		case f[0] == "V":
			overlaps++
		case f[0] == "S":
			commands++
		}
	}
	if !split {
		// Every check of the shared driver: no V (two COMMANDs at once),
		// no R (a deposed term's write refused by the fence), epochs
		// growing, one wrapper a term.
		if _, err := drv.Check(run, drv.Checks{Violation: t.Errorf}); err != nil {
			t.Fatal(err)
		}
	}
	var codes []string
	for c, n := range exits {
		codes = append(codes, fmt.Sprintf("%s: %d", c, n))
	}
	slices.Sort(codes)
	var fs []string
	for f, n := range faults {
		fs = append(fs, fmt.Sprintf("%s: %d", f, n))
	}
	slices.Sort(fs)
	t.Logf("%d COMMANDs, %d overlaps; faults %s; exits %s; a COMMAND started %v after the faults stopped",
		commands, overlaps, strings.Join(fs, ", "), strings.Join(codes, ", "), liveness.Round(time.Millisecond))
	clean, killed := stalls(lines)
	t.Logf("stalls, one COMMAND's end to the next one's start: after a clean end %s; after a COMMAND killed, from its start %s",
		drv.Quantiles(clean), drv.Quantiles(killed))
	if commands == 0 {
		t.Error("no COMMAND ran at all")
	}
	return overlaps
}

// stalls reads the S and E lines of the log: the time from each COMMAND's
// end (E) to the next COMMAND's start (S), and, for a COMMAND that has no
// E (killed, or its term ended under it), from its start to the next
// start: an upper bound, which includes its own run. Faults make the
// long ones: a server stopped past the TTL, a wrapper stopped until its
// deadline.
func stalls(lines []string) (clean, killed []time.Duration) {
	var start, end int64
	for _, ln := range lines {
		f := strings.Fields(ln)
		if len(f) < 4 {
			continue
		}
		ns, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "E":
			end = ns
		case "S":
			switch {
			case start != 0 && end > start:
				clean = append(clean, time.Duration(ns-end))
			case start != 0:
				killed = append(killed, time.Duration(ns-start))
			}
			start, end = ns, 0
		}
	}
	return clean, killed
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return ls[len(ls)-1]
}

// starts counts the COMMAND starts logged so far.
func starts(t *testing.T, run string) int {
	b, _ := os.ReadFile(filepath.Join(run, "log"))
	return strings.Count(string(b), "\nS ") + map[bool]int{true: 1}[strings.HasPrefix(string(b), "S ")]
}
