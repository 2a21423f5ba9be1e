package supervise

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

// A term begun with what was prepared while waiting has its id, its
// cgroup and its marker's inode (made unnamed in the lock directory), and
// COMMAND runs in that cgroup.
func TestPreparedTerm(t *testing.T) {
	dir := t.TempDir()
	p := Prepare(dir, false)
	if p.marker == nil {
		t.Fatal("Prepare made no unnamed marker in a lock directory on " + dir)
	}
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Fatalf("Prepare left names in the lock directory: %v", names)
	}
	var unnamed syscall.Stat_t
	if err := syscall.Fstat(int(p.marker.Fd()), &unnamed); err != nil {
		t.Fatal(err)
	}
	lk, err := elect.Open(elect.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	lead, err := lk.Acquire(t.Context(), "job", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Release()
	tm := Begin(t.Context(), lead, dir, p)
	if tm.rec.id != p.id || tm.cg != p.cg {
		t.Fatalf("term %s cgroup %v, prepared %s %v", tm.rec.id, tm.cg, p.id, p.cg)
	}
	var named syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, tm.file), &named); err != nil || named.Ino != unnamed.Ino {
		t.Fatalf("the marker %s is inode %d (%v), not the one prepared, %d", tm.file, named.Ino, err, unnamed.Ino)
	}
	if b, err := os.ReadFile(filepath.Join(dir, tm.file)); err != nil || !strings.Contains(string(b), "id "+p.id+"\n") {
		t.Fatalf("the marker holds %q, %v", b, err)
	} else if rec, err := parseTermRecord(b); err != nil || rec.id != p.id {
		t.Fatalf("the marker holds %+v, %v", rec, err)
	}
	out := filepath.Join(dir, "cgroup")
	ch, err := tm.Start([]string{"sh", "-c", "grep ^0:: /proc/self/cgroup > " + out}, os.Environ(), os.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	<-ch.Done()
	p.Close() // taken: does nothing
	if tm.cg != nil {
		if b, _ := os.ReadFile(out); !strings.HasSuffix(strings.TrimSpace(string(b)), "/leaderrun-"+p.id) {
			t.Fatalf("COMMAND ran in %q, not the prepared cgroup %s", b, tm.cg.path)
		}
	}
	tm.End()
	if tm.cg != nil {
		if _, err := os.Stat(tm.cg.path); !os.IsNotExist(err) {
			t.Fatalf("the term's cgroup is still there after End: %v", err)
		}
	}
}

// What a waiter prepared goes when it closes it, and what a killed one
// left (empty, unlocked) goes at the next process's first Prepare.
func TestPreparedLeftBehind(t *testing.T) {
	dir := t.TempDir()
	p := Prepare(dir, false)
	if p.marker == nil {
		t.Fatal("no unnamed marker made")
	}
	p.Close()
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Fatalf("a closed Prepared left %v in the lock directory", names)
	}
	if p.cg == nil {
		t.Skip("no cgroup of our own here: nothing to leave behind")
	}
	p.Close()
	if _, err := os.Stat(p.cg.path); !os.IsNotExist(err) {
		t.Fatalf("closed, its cgroup is still there: %v", err)
	}
	// A killed waiter's: its lock went with it. A live one's stays.
	dead, live := Prepare("", false), Prepare("", false)
	defer live.Close()
	dead.cg.dir.Close()
	old := time.Now().Add(-time.Minute)
	for _, p := range []*Prepared{dead, live} {
		if err := os.Chtimes(p.cg.path, old, old); err != nil {
			t.Skip("cannot age a cgroup here:", err)
		}
	}
	c := helperCmd("sweep")
	c.Env = append(c.Env, proctest.RoleEnv+"=helper")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("sweep: %v\n%s", err, out)
	}
	if _, err := os.Stat(dead.cg.path); !os.IsNotExist(err) {
		t.Fatalf("a dead waiter's cgroup was not swept: %v", err)
	}
	if _, err := os.Stat(live.cg.path); err != nil {
		t.Fatalf("a live waiter's cgroup was swept: %v", err)
	}
}

// BenchmarkStart: from the grant to COMMAND's exit (/bin/true), with the
// term's cgroup made at the grant (at-grant) and made while waiting
// (prepared), interleaved; medians. A spare process forked while waiting
// and exec'd at the grant (commit 40bc27e, its BenchmarkStart) measured
// 606-668 µs against prepared's 628-677 µs in one run: no faster.
//
//	go test -run '^$' -bench Start -benchtime 300x ./supervise
func BenchmarkStart(b *testing.B) {
	argv := []string{"/bin/true"}
	env := os.Environ()
	run := func(cg *termCgroup) {
		var prepare []func(*exec.Cmd)
		if cg != nil {
			prepare = append(prepare, cg.prepare)
		}
		ch, err := startChild(argv, env, os.Stdout, prepare...)
		if err != nil {
			b.Fatal(err)
		}
		<-ch.Done()
		if cg != nil {
			cg.remove(b.Context())
		}
	}
	var atGrant, prepared []float64
	for range b.N {
		t0 := time.Now()
		run(newTermCgroup(newTermID()))
		atGrant = append(atGrant, float64(time.Since(t0)))
		cg := newTermCgroup(newTermID())
		t0 = time.Now()
		run(cg)
		prepared = append(prepared, float64(time.Since(t0)))
	}
	med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] / 1e3 }
	b.ReportMetric(med(atGrant), "at-grant-µs")
	b.ReportMetric(med(prepared), "prepared-µs")
	b.ReportMetric(0, "ns/op")
}

// ownThreads, read from /proc/self/stat, counts what /proc/self/status's
// Threads line counts.
func TestOwnThreads(t *testing.T) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			want, _ := strconv.Atoi(strings.TrimSpace(v))
			// Threads may start or end between the two reads.
			if got := ownThreads(); got < want-2 || got > want+2 || got < 1 {
				t.Errorf("ownThreads() = %d; /proc/self/status says %d", got, want)
			}
		}
	}
}
