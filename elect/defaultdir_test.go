package elect

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

// setHomeHook makes DefaultDir look homes up with lookup and fall back under
// base for the rest of t.
func setHomeHook(t *testing.T, lookup func(int) (string, error), base string) {
	t.Helper()
	oldLookup, oldBase := lookupHome, fallbackBase
	lookupHome, fallbackBase = lookup, base
	t.Cleanup(func() { lookupHome, fallbackBase = oldLookup, oldBase })
}

// defaultDirRole prints "dir DefaultDir()" and, with DD_OPEN set, opens the
// default and prints "opened DIR" or "error ERR". DD_HOME and DD_FALLBACK,
// when set, stand in for the user database and /run/lock, so that a test
// never touches the real user's home; the variables the environments vary
// (HOME, TMPDIR, XDG_*) are never consulted.
func defaultDirRole() int {
	if h, ok := os.LookupEnv("DD_HOME"); ok {
		lookupHome = func(int) (string, error) { return h, nil }
	}
	if b, ok := os.LookupEnv("DD_FALLBACK"); ok {
		fallbackBase = b
	}
	fmt.Println("dir", DefaultDir())
	if os.Getenv("DD_OPEN") != "" {
		l, err := Open(Config{})
		if err != nil {
			fmt.Println("error", err)
			return 0
		}
		fmt.Println("opened", l.Dir())
		l.Close()
	}
	return 0
}

// environments are the ways one user's processes are started: a login shell,
// cron, su/sudo carrying the caller's variables, a service, an old terminal.
func environments(t *testing.T, home string) map[string][]string {
	other := t.TempDir()
	inherited := os.Environ()
	without := func(drop ...string) []string {
		var env []string
		for _, kv := range inherited {
			k, _, _ := strings.Cut(kv, "=")
			if !containsString(drop, k) {
				env = append(env, kv)
			}
		}
		return env
	}
	with := func(kv ...string) []string { return append(without(), kv...) }
	return map[string][]string{
		"inherited":                  inherited,
		"XDG_RUNTIME_DIR set":        with("XDG_RUNTIME_DIR=" + other),
		"XDG_RUNTIME_DIR unset":      without("XDG_RUNTIME_DIR"),
		"XDG_RUNTIME_DIR bogus":      with("XDG_RUNTIME_DIR=/nonexistent/run/user/4242"),
		"XDG_RUNTIME_DIR relative":   with("XDG_RUNTIME_DIR=run/user"),
		"HOME of another user":       with("HOME=/root", "XDG_RUNTIME_DIR=/run/user/0", "USER=root", "LOGNAME=root"),
		"HOME changed":               with("HOME=" + other),
		"HOME unset":                 without("HOME"),
		"TMPDIR changed":             with("TMPDIR=" + other),
		"XDG_STATE_HOME elsewhere":   with("XDG_STATE_HOME="+other, "XDG_CACHE_HOME="+other, "XDG_DATA_HOME="+other),
		"cron (minimal environment)": {"HOME=" + home, "LOGNAME=x", "PATH=/usr/bin:/bin", "SHELL=/bin/sh"},
		"empty environment":          {},
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// runDefaultDir runs the helper as bin with exactly env (plus the role and
// extra) and returns its output lines.
func runDefaultDir(t *testing.T, bin string, cred *syscall.Credential, env []string, extra ...string) []string {
	t.Helper()
	cmd := proctest.CommandAt(bin, "defaultdir", append(append([]string{}, env...), extra...))
	out, code := proctest.Run(t, "defaultdir", cmd, proctest.Options{Cred: cred})
	if code != 0 {
		t.Fatalf("helper: exit code %d\n%s", code, strings.Join(out, "\n"))
	}
	return out
}

// Every environment a user's processes run in resolves the same default
// directory, derived from the home in the user database, and Open makes it
// (and the missing XDG parents) private.
func TestDefaultDirSameEverywhere(t *testing.T) {
	home := t.TempDir()
	want := filepath.Join(home, ".local", "state", "leaderrun")
	for name, env := range environments(t, home) {
		t.Run(name, func(t *testing.T) {
			got := runDefaultDir(t, os.Args[0], nil, env, "DD_HOME="+home, "DD_OPEN=1")
			if len(got) != 2 || got[0] != "dir "+want || got[1] != "opened "+want {
				t.Errorf("got %q; want dir and opened %s", got, want)
			}
		})
	}
	for _, d := range []string{filepath.Join(home, ".local"), filepath.Join(home, ".local", "state"), want} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 || !fi.IsDir() {
			t.Errorf("%s: %v, mode %v; want a directory with mode 0700", d, err, fi.Mode())
		}
	}
}

// The fallback is taken on facts of the user database and the machine
// only, and a home that exists and is the user's is kept even when it cannot
// be used: Open then fails rather than splitting the user's processes.
func TestDefaultDirFallback(t *testing.T) {
	base := t.TempDir()
	fb := filepath.Join(base, "runlock")
	uid := os.Geteuid()
	fallback := filepath.Join(fb, "leaderrun-"+strconv.Itoa(uid))
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	good := filepath.Join(base, "good")
	os.Mkdir(good, 0o700)
	for _, tc := range []struct {
		name   string
		lookup func(int) (string, error)
		want   string
		why    string
	}{
		{"no passwd entry", func(int) (string, error) { return "", user.UnknownUserIdError(uid) }, fallback, "not in the user database"},
		{"empty home", func(int) (string, error) { return "", nil }, fallback, "no home directory of its own"},
		{"relative home", func(int) (string, error) { return "home/x", nil }, fallback, "no home directory of its own"},
		{"home is /", func(int) (string, error) { return "/", nil }, fallback, "no home directory of its own"},
		{"home missing", func(int) (string, error) { return "/nonexistent", nil }, fallback, "does not exist"},
		{"home under a file", func(int) (string, error) { return file + "/x", nil }, fallback, "does not exist"},
		{"home is a file", func(int) (string, error) { return file, nil }, fallback, "is not a directory"},
		{"usable home", func(int) (string, error) { return good, nil }, filepath.Join(good, ".local", "state", "leaderrun"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setHomeHook(t, tc.lookup, fb)
			got, why := defaultDir(uid)
			if got != tc.want {
				t.Errorf("default %s; want %s (why: %v)", got, tc.want, why)
			}
			if (why == nil) != (tc.why == "") || why != nil && !strings.Contains(why.Error(), tc.why) {
				t.Errorf("why %v; want %q", why, tc.why)
			}
		})
	}
	if os.Geteuid() == 0 {
		t.Run("home owned by another user", func(t *testing.T) {
			foreign := filepath.Join(base, "foreign")
			os.Mkdir(foreign, 0o755)
			if err := os.Chown(foreign, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			setHomeHook(t, func(int) (string, error) { return foreign, nil }, fb)
			if got, why := defaultDir(uid); got != fallback || why == nil || !strings.Contains(why.Error(), "owned by uid 65534") {
				t.Errorf("default %s (why %v); want %s because of the owner", got, why, fallback)
			}
			if _, err := os.Stat(filepath.Join(foreign, ".local")); err == nil {
				t.Error("created .local in another user's home")
			}
		})
	}
}

// As root: a real second user, whose home comes from the real user
// database, resolves one directory from every environment, including one
// carrying root's HOME and XDG_RUNTIME_DIR as sudo and su without "-" do.
// Its home being unwritable makes Open fail instead of falling back.
func TestDefaultDirRealUser(t *testing.T) {
	base := proctest.SharedTempDir(t)
	home := filepath.Join(base, "home")
	_, uid, gid := proctest.User(t, "leaderrun-dd", home)
	bin := proctest.CopyBinary(t, base)
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, uid, gid); err != nil {
		t.Fatal(err)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	want := filepath.Join(home, ".local", "state", "leaderrun")
	for name, env := range environments(t, home) {
		t.Run(name, func(t *testing.T) {
			got := runDefaultDir(t, bin, cred, env, "DD_OPEN=1")
			if len(got) != 2 || got[0] != "dir "+want || got[1] != "opened "+want {
				t.Errorf("got %q; want dir and opened %s", got, want)
			}
		})
	}
	var st syscall.Stat_t
	if err := syscall.Stat(want, &st); err != nil || int(st.Uid) != uid || st.Mode&0o7777 != 0o700 {
		t.Errorf("%s: %v, owner %d, mode %o; want owned by %d, mode 0700", want, err, st.Uid, st.Mode&0o7777, uid)
	}

	t.Run("unwritable home", func(t *testing.T) {
		if err := os.RemoveAll(filepath.Join(home, ".local")); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(home, 0o500); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(home, 0o700)
		got := runDefaultDir(t, bin, cred, nil, "DD_OPEN=1")
		if len(got) != 2 || got[0] != "dir "+want || !strings.HasPrefix(got[1], "error ") || !strings.Contains(got[1], "cannot create lock directory") {
			t.Errorf("got %q; want dir %s and an error saying it cannot be created, not a fallback", got, want)
		}
	})
	t.Run("no home", func(t *testing.T) {
		_, noHome, _ := proctest.User(t, "leaderrun-dd-nohome", "/nonexistent")
		cred := &syscall.Credential{Uid: uint32(noHome), Gid: uint32(gid), Groups: []uint32{}}
		fb := filepath.Join(FallbackBase, "leaderrun-"+strconv.Itoa(noHome))
		for name, env := range environments(t, home) {
			if got := runDefaultDir(t, bin, cred, env); len(got) != 1 || got[0] != "dir "+fb {
				t.Errorf("%s: got %q; want dir %s", name, got, fb)
			}
		}
	})
}
