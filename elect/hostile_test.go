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

// Another user on the same machine must not be able to join or steal a
// lock, read who holds it, or redirect what we write, neither in a private
// 0700 directory (the default) nor in an explicitly group-shared one whose
// group they are not in. CI runs as root, which can create a throwaway
// user; elsewhere the test is skipped.
const hostileUser = "leaderrun-hostile"

func TestHostileUser(t *testing.T) {
	_, uid, gid := proctest.User(t, hostileUser, "/nonexistent")
	base := proctest.SharedTempDir(t)
	bin := proctest.CopyBinary(t, base)
	private, shared := hostileDirs(t, base)
	for _, tc := range []struct {
		name string
		dir  string
		cfg  Config
	}{
		{"private", private, Config{Dir: private}},
		{"group-shared", shared, Config{Dir: shared, GroupShared: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hostile{bin: bin, uid: uid, gid: gid, base: base}
			h.cannotTouchHeldLock(t, tc.name, tc.dir, tc.cfg)
		})
	}
	// For a user without a usable home the default directory lives in a
	// place others can write (/run/lock), under a name anyone can predict.
	// Whatever another user puts there first is refused, never used.
	t.Run("squatted-default", func(t *testing.T) {
		h := hostile{bin: bin, uid: uid, gid: gid, base: base}
		h.cannotSquatDefault(t)
	})
}

// hostileDirs makes a private lock directory (0700, the default) and a
// group-shared one (setgid 2770, as a shared directory would be) in base.
func hostileDirs(t *testing.T, base string) (private, shared string) {
	t.Helper()
	private = filepath.Join(base, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	shared = filepath.Join(base, "shared")
	if err := os.Mkdir(shared, 0o770); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Chmod(shared, 0o2770); err != nil {
		t.Fatal(err)
	}
	return private, shared
}

// hostile is the other user: a copy of the test binary it can run, its
// ids, and the reachable base directory of the test.
type hostile struct {
	bin      string
	uid, gid int
	base     string
}

// cannotTouchHeldLock holds "job" in dir and checks that the other user
// can do none of what a contender or an attacker would, and changes
// nothing.
func (h hostile) cannotTouchHeldLock(t *testing.T, name, dir string, cfg Config) {
	l, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lead, err := l.Acquire(testCtx(t), "job", Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Release()
	before := snapshotTree(t, dir)
	tickets, _ := filepath.Glob(filepath.Join(dir, "job.queue", "t*[0-9]"))
	if len(tickets) != 1 {
		t.Fatalf("want the holder's ticket, have %v", tickets)
	}
	victim := filepath.Join(h.base, "victim-"+name)
	if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, op := range []struct{ what, op, path, arg string }{
		{"join the queue", "acquire", dir, ""},
		{"steal", "steal", dir, ""},
		{"query the holder", "query", dir, ""},
		{"read the holder record", "read", tickets[0], ""},
		{"read the state file", "read", filepath.Join(dir, "job.state"), ""},
		{"take the lock file with flock(1)", "flock", filepath.Join(dir, "job.lock"), ""},
		{"plant a symlink as the next ticket", "symlink", filepath.Join(dir, "job.queue", ticketName(99, false)), victim},
		{"plant a symlink as a lock file", "symlink", filepath.Join(dir, "other.lock"), victim},
		{"plant a symlink as a state file", "symlink", filepath.Join(dir, "other.state"), victim},
	} {
		out := h.run(t, op.op, op.path, op.arg)
		if !strings.HasPrefix(out, "denied") {
			t.Errorf("another user could %s: %s", op.what, out)
		} else {
			t.Logf("%s: %s", op.what, out)
		}
	}
	if err := lead.Err(); err != nil {
		t.Errorf("the holder lost its term: %v", err)
	}
	if after := snapshotTree(t, dir); after != before {
		t.Errorf("the lock directory changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("a file outside the lock directory was written: %q", b)
	}
}

// cannotSquatDefault lets the other user put a symlink or a directory of
// its own where the default directory goes, and checks that Open refuses
// it and writes nothing into it.
func (h hostile) cannotSquatDefault(t *testing.T) {
	tmp := filepath.Join(h.base, "runlock")
	if err := os.Mkdir(tmp, 0o777); err != nil {
		t.Fatal(err)
	}
	syscall.Chmod(tmp, 0o1777)
	setHomeHook(t, func(int) (string, error) { return "/nonexistent", nil }, tmp)
	def := DefaultDir()
	if filepath.Dir(def) != tmp {
		t.Fatalf("DefaultDir %s is not under the fallback base %s", def, tmp)
	}
	victim := filepath.Join(h.base, "victim-default")
	if err := os.Mkdir(victim, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(victim, 0o777)
	for _, sq := range []struct{ what, op, arg, want string }{
		{"a symlink to a directory of theirs", "symlink", victim, "is a symbolic link"},
		{"a directory of theirs", "mkdir", "", "is owned by uid " + strconv.Itoa(h.uid)},
	} {
		os.Remove(def)
		if out := h.run(t, sq.op, def, sq.arg); out != "ok" {
			t.Fatalf("setting up %s: %s", sq.what, out)
		}
		_, err := Open(Config{})
		if !errors.Is(err, ErrInsecureDir) || !strings.Contains(err.Error(), sq.want) {
			t.Errorf("default directory squatted by %s: got %v; want ErrInsecureDir saying %q", sq.what, err, sq.want)
		}
		if ents, _ := os.ReadDir(victim); len(ents) != 0 {
			t.Errorf("wrote into the other user's directory: %v", ents)
		}
	}
	os.Remove(def)
}

// run runs the test binary as the other user (no supplementary groups)
// doing op, and returns its one-line answer.
func (h hostile) run(t *testing.T, op, path, arg string) string {
	t.Helper()
	cmd := proctest.CommandAt(h.bin, "hostile", []string{"H_OP=" + op, "H_PATH=" + path, "H_ARG=" + arg, "PATH=/usr/bin:/bin"})
	cred := &syscall.Credential{Uid: uint32(h.uid), Gid: uint32(h.gid), Groups: []uint32{}}
	out, code := proctest.Run(t, "hostile "+op, cmd, proctest.Options{Cred: cred})
	if code != 0 && len(out) == 0 {
		t.Fatalf("running %s as uid %d: exit code %d", op, h.uid, code)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// hostileRole is the other user's process: it tries one thing and says
// "ok", or "denied: WHY" when the system or leaderrun refused.
func hostileRole() int {
	op, path, arg := os.Getenv("H_OP"), os.Getenv("H_PATH"), os.Getenv("H_ARG")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var err error
	switch op {
	case "acquire", "steal", "query":
		var l *Locker
		if l, err = Open(Config{Dir: path, GroupShared: true}); err == nil {
			defer l.Close()
			switch op {
			case "query":
				var s Snapshot
				if s, err = l.Query(ctx, "job"); err == nil && len(s.Held) == 0 {
					err = errors.New("query saw no holder")
				}
			default:
				_, err = l.Acquire(ctx, "job", Request{Steal: op == "steal"})
			}
		}
	case "read":
		var b []byte
		if b, err = os.ReadFile(path); err == nil {
			fmt.Printf("ok: read %q\n", b)
			return 0
		}
	case "flock":
		var f *os.File
		if f, err = os.Open(path); err == nil {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			f.Close()
		}
	case "symlink":
		err = os.Symlink(arg, path)
	case "mkdir":
		if err = os.Mkdir(path, 0o777); err == nil {
			err = os.Chmod(path, 0o777)
		}
	default:
		err = fmt.Errorf("unknown op %q", op)
	}
	if err != nil {
		fmt.Println("denied:", err)
		return 0
	}
	fmt.Println("ok")
	return 0
}

// snapshotTree lists every path under dir with its mode, owner and, for
// regular files, content, for before/after comparisons.
func snapshotTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v %d:%d", rel, fi.Mode(), st.Uid, st.Gid)
		if fi.Mode().IsRegular() {
			c, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %q", c)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			l, _ := os.Readlink(p)
			fmt.Fprintf(&b, " -> %s", l)
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
