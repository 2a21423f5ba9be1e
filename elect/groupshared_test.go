package elect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

// What a group-shared directory guarantees when its members are different
// users (issue 9 item 5): every member of the directory's group takes part
// in one queue as if they were one user — FIFO, -n/-w, Query showing the
// other member's holder as the leaderrun holder it is, a dead member's
// ticket removed by whoever meets it. What it does not give: a member
// cannot signal another member's processes (kill(2) needs the same uid or
// CAP_KILL), so neither a steal's KillAfter nor the CLI's orphan fence can
// end another member's holder or leftovers; those need that member, or
// root.
//
// The members are real users, each with a private primary group as Debian
// creates them (useradd -U) and the shared group as a supplementary one,
// which is what the processes of a login get.
const (
	gsTeam = "leaderrun-gs-team"
	gsA    = "leaderrun-gs-a"
	gsB    = "leaderrun-gs-b"
)

type member struct {
	name string
	uid  int
	gid  int // private primary group
	cred *syscall.Credential
}

// groupSharedSetup creates the shared group and two members, a copy of the
// test binary they can run, and a group-shared lock directory (owned by
// root, group team; mode 2770, or 0770 without setgid when plain).
func groupSharedSetup(t *testing.T, plain bool) (bin, dir string, a, b member, team int) {
	t.Helper()
	teamName, team := proctest.Group(t, gsTeam)
	a, b = groupMember(t, gsA, teamName, team), groupMember(t, gsB, teamName, team)
	base := proctest.SharedTempDir(t)
	bin = proctest.CopyBinary(t, base)
	dir = filepath.Join(base, "shared")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 0, team); err != nil {
		t.Fatal(err)
	}
	mode := uint32(0o2770)
	if plain {
		mode = 0o770
	}
	if err := syscall.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return bin, dir, a, b, team
}

// groupMember creates a user (named after base) with a private primary group and the
// group team as a supplementary one, as a login's processes have.
func groupMember(t *testing.T, base, teamName string, team int) member {
	t.Helper()
	var m member
	m.name, m.uid, m.gid = proctest.User(t, base, "/nonexistent", teamName)
	if m.gid == team {
		t.Fatalf("%s: uid %d gid %d; want a private primary group", m.name, m.uid, m.gid)
	}
	m.cred = &syscall.Credential{Uid: uint32(m.uid), Gid: uint32(m.gid), Groups: []uint32{uint32(team)}}
	return m
}

// startAs runs the groupshared role as m; env are G_* settings.
func startAs(t *testing.T, bin string, m member, env ...string) *proctest.Proc {
	t.Helper()
	cmd := proctest.CommandAt(bin, "groupshared", append([]string{"PATH=/usr/bin:/bin"}, env...))
	return proctest.Start(t, m.name, cmd, proctest.Options{Cred: m.cred})
}

// groupSharedRole is a member's process. G_OP says what it does with the
// name G_NAME in the group-shared directory G_DIR:
//
//	hold   acquire (waiting at most 20s), print "leader EPOCH", then release
//	       on "release" or stdin's end, or print "lost ERR" if the term ends
//	try    Request{IfAvailable}: "busy" or "leader EPOCH"
//	wait   acquire waiting at most G_TIMEOUT: "timeout" or "leader EPOCH"
//	steal  steal with KillAfter G_KILLAFTER, waiting at most G_TIMEOUT
//	query  "held PID EPOCH external=BOOL" per holder, then "pending N"
//	prune  Prune, then "pruned"
//	signal signal 0 to G_PID: "signal ok" or "signal ERR"
func groupSharedRole() int {
	env := os.Getenv
	if env("G_OP") == "signal" {
		pid, _ := strconv.Atoi(env("G_PID"))
		if err := syscall.Kill(pid, 0); err != nil {
			fmt.Println("signal", err)
		} else {
			fmt.Println("signal ok")
		}
		return 0
	}
	l, err := Open(Config{Dir: env("G_DIR"), GroupShared: true})
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if d, err := time.ParseDuration(env("G_TIMEOUT")); err == nil {
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	switch env("G_OP") {
	case "query":
		return groupQuery(ctx, l, env("G_NAME"))
	case "prune":
		if err := l.Prune(ctx, env("G_NAME")); err != nil {
			fmt.Println("error", err)
			return 2
		}
		fmt.Println("pruned")
		return 0
	}
	return groupAcquire(ctx, l, env("G_NAME"))
}

// groupQuery prints "held PID EPOCH external=BOOL" per holder of name,
// then "pending N".
func groupQuery(ctx context.Context, l *Locker, name string) int {
	s, err := l.Query(ctx, name)
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	for _, h := range s.Held {
		fmt.Printf("held %d %d external=%v\n", h.PID, h.Epoch, h.External)
	}
	fmt.Println("pending", len(s.Pending))
	return 0
}

// groupAcquire does G_OP hold, try, wait or steal on name.
func groupAcquire(ctx context.Context, l *Locker, name string) int {
	env := os.Getenv
	var req Request
	switch env("G_OP") {
	case "try":
		req.IfAvailable = true
	case "steal":
		req.Steal = true
		req.KillAfter, _ = time.ParseDuration(env("G_KILLAFTER"))
	}
	lead, err := l.Acquire(ctx, name, req)
	switch {
	case errors.Is(err, ErrBusy):
		fmt.Println("busy")
		return 0
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Println("timeout")
		return 0
	case err != nil:
		fmt.Println("error", err)
		return 2
	}
	fmt.Println("leader", lead.Epoch())
	if env("G_OP") != "hold" {
		lead.Release()
		return 0
	}
	return holdTerm(lead, func() int { lead.Release(); return 0 })
}

// TestGroupSharedMembers: two members of one group, each with a private
// primary group, share a name: the second member's -n and -w answer busy
// and timeout (not a permission error), it sees the first member's holder
// as a leaderrun holder with its epoch, it queues and is granted in turn,
// and it removes a dead member's leftover ticket.
func TestGroupSharedMembers(t *testing.T) {
	for _, plain := range []bool{false, true} {
		t.Run(map[bool]string{false: "setgid 2770", true: "plain 0770"}[plain], func(t *testing.T) {
			bin, dir, a, b, team := groupSharedSetup(t, plain)
			g := func(op, name string, extra ...string) []string {
				return append([]string{"G_OP=" + op, "G_DIR=" + dir, "G_NAME=" + name}, extra...)
			}

			holder := startAs(t, bin, a, g("hold", "job")...)
			e1 := epochOf(t, holder.Expect("leader "))
			checkShared(t, filepath.Join(dir, "job.queue"), team, true)

			startAs(t, bin, b, g("try", "job")...).Expect("busy")
			startAs(t, bin, b, g("wait", "job", "G_TIMEOUT=300ms")...).Expect("timeout")
			q := startAs(t, bin, b, g("query", "job")...)
			if got, want := q.Expect("held "), fmt.Sprintf("held %d %d external=false", holder.PID(), e1); got != want {
				t.Errorf("the other member's holder: %q; want %q (a leaderrun holder, not external)", got, want)
			}
			q.Expect("pending 0")

			// b queues behind a and is granted when a releases.
			waiter := startAs(t, bin, b, g("hold", "job")...)
			proctest.Eventually(t, "b's ticket in the queue", func() bool {
				names, _ := filepath.Glob(filepath.Join(dir, "job.queue", "t*[0-9]"))
				return len(names) == 2
			})
			holder.Send("release")
			holder.Expect("released")
			if e2 := epochOf(t, waiter.Expect("leader ")); e2 <= e1 {
				t.Errorf("b's epoch %d is not above a's %d", e2, e1)
			}
			waiter.Send("release")
			waiter.Expect("released")

			// A member killed while holding leaves its ticket; the
			// other member's request removes it and leads.
			dead := startAs(t, bin, a, g("hold", "left")...)
			dead.Expect("leader ")
			dead.Kill()
			left, _ := filepath.Glob(filepath.Join(dir, "left.queue", "t*[0-9]"))
			if len(left) != 1 {
				t.Fatalf("the killed member's ticket: %v; want one left behind", left)
			}
			startAs(t, bin, b, g("try", "left")...).Expect("leader ")
			if _, err := os.Lstat(left[0]); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the dead member's ticket %s is still there (%v)", left[0], err)
			}
			startAs(t, bin, b, g("prune", "left")...).Expect("pruned")
			checkGroupOwnsAll(t, dir, team)
		})
	}
}

// checkGroupOwnsAll checks that every entry a member created under dir
// has the directory's group.
func checkGroupOwnsAll(t *testing.T, dir string, team int) {
	t.Helper()
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && p != dir {
			if st := fi.Sys().(*syscall.Stat_t); int(st.Gid) != team {
				t.Errorf("%s has group %d, not the directory's %d", p, st.Gid, team)
			}
		}
		return nil
	})
}

// checkShared checks that a directory has the group and, when isDir, mode
// 2770 with no sticky bit.
func checkShared(t *testing.T, path string, gid int, isDir bool) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	if int(st.Gid) != gid || isDir && st.Mode&0o7777 != 0o2770 {
		t.Errorf("%s: group %d mode %04o; want group %d mode 2770", path, st.Gid, st.Mode&0o7777, gid)
	}
}

// A member can steal from another member's holder that lets go, but
// cannot kill one that does not: kill(2) needs the same uid. This is also
// why the CLI's orphan fence cannot end another member's leftovers.
func TestGroupSharedSteal(t *testing.T) {
	bin, dir, a, b, _ := groupSharedSetup(t, false)
	g := func(op, name string, extra ...string) []string {
		return append([]string{"G_OP=" + op, "G_DIR=" + dir, "G_NAME=" + name}, extra...)
	}
	holder := startAs(t, bin, a, g("hold", "job")...)
	e1 := epochOf(t, holder.Expect("leader "))
	stealer := startAs(t, bin, b, g("steal", "job", "G_TIMEOUT=10s")...)
	holder.Expect("lost ")
	if e2 := epochOf(t, stealer.Expect("leader ")); e2 <= e1 {
		t.Errorf("stealer's epoch %d is not above %d", e2, e1)
	}

	// The OS rule the non-guarantee rests on.
	victim := startAs(t, bin, a, g("hold", "other")...)
	victim.Expect("leader ")
	if got := startAs(t, bin, b, "G_OP=signal", "G_PID="+strconv.Itoa(victim.PID())).Expect("signal "); !strings.Contains(got, "not permitted") {
		t.Errorf("b signalling a's process: %q; want operation not permitted", got)
	}

	t.Run("stopped holder of another member", func(t *testing.T) {
		victim.Signal(syscall.SIGSTOP)
		defer victim.Signal(syscall.SIGCONT)
		out := startAs(t, bin, b, g("steal", "other", "G_KILLAFTER=100ms", "G_TIMEOUT=5s")...).Expect("")
		if !strings.HasPrefix(out, "error") || !strings.Contains(out, strconv.Itoa(a.uid)) {
			t.Errorf("steal from a stopped holder of uid %d: %q; want an error naming the uid", a.uid, out)
		}
	})
}
