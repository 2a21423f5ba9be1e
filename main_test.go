package main

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/scriptcmd"
	"github.com/rogpeppe/go-internal/txtar"

	"github.com/leaderrun/leaderrun/cmd"
)

var update = flag.Bool("u", false, "update testscript files whose cmp fails")

func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) != "leaderrun" && signal.Ignored(syscall.SIGHUP) {
		// Run under nohup (a background soak), the test binary would pass
		// an ignored SIGHUP on to every process a script starts, and a
		// shell cannot trap a signal ignored on entry: the scripts that
		// send SIGHUP would fail. A handler, unlike an ignore, is not
		// inherited across exec.
		signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	}
	testscript.Main(m, map[string]func(){"leaderrun": main, "singleapp": singleAppMain})
}

// TestScripts runs testscripts/<area>/<command>__<topic>.txtar. Each script
// gets $LEADERRUN_DIR=$WORK/locks, created private (0700).
func TestScripts(t *testing.T) {
	areas, err := filepath.Glob("testscripts/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, area := range areas {
		t.Run(filepath.Base(area), func(t *testing.T) {
			t.Parallel()
			p := scriptParams("")
			p.Dir = area
			testscript.Run(t, p)
		})
	}
}

// installedScripts are the testscripts TestInstalled runs against the
// installed binary.
var installedScripts = []string{
	"testscripts/run/run__version.txtar",
	"testscripts/run/run__unix_codes.txtar",
	"testscripts/run/run__exit_codes.txtar",
	"testscripts/run/run__help.txtar",
	"testscripts/run/run__path_unset.txtar",
	"testscripts/run/run__flock_flags.txtar",
	"testscripts/hygiene/run__flock.txtar",
	"testscripts/hygiene/run__sigkill_leader.txtar",
	"testscripts/bus/publish__subscribe.txtar",
	"testscripts/recipes/run__flock.txtar",
	"testscripts/recipes/run__self_wrapping.txtar",
	"testscripts/recipes/who__recipe.txtar",
}

// TestInstalled runs installedScripts with the leaderrun that
// $LEADERRUN_INSTALLED names (/usr/bin/leaderrun from the .deb, in
// .ci/run) first on PATH instead of the test binary.
func TestInstalled(t *testing.T) {
	bin := os.Getenv("LEADERRUN_INSTALLED")
	if bin == "" {
		t.Skip("LEADERRUN_INSTALLED is not set (.ci/run sets it after installing the .deb)")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatal(err)
	}
	p := scriptParams(bin)
	p.Files = installedScripts
	testscript.Run(t, p)
}

// scriptParams are the testscript parameters of this package; a
// non-empty installed puts that binary first on PATH as leaderrun.
func scriptParams(installed string) testscript.Params {
	return testscript.Params{
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       *update,
		Setup: func(env *testscript.Env) error {
			dir := filepath.Join(env.WorkDir, "locks")
			if err := os.Mkdir(dir, 0o700); err != nil {
				return err
			}
			env.Setenv("LEADERRUN_DIR", dir)
			if installed != "" {
				bin := filepath.Join(env.WorkDir, ".installed")
				if err := os.Mkdir(bin, 0o755); err != nil {
					return err
				}
				if err := os.Symlink(installed, filepath.Join(bin, "leaderrun")); err != nil {
					return err
				}
				env.Setenv("PATH", bin+string(filepath.ListSeparator)+env.Getenv("PATH"))
			}
			return nil
		},
		Condition: scriptCondition,
		Cmds:      scriptCmds(),
	}
}

// scriptCmds are the shared commands (internal/scriptcmd) and this
// module's testgroup and testuser.
func scriptCmds() map[string]scriptcmd.Cmd {
	cmds := scriptcmd.Commands(leaderrun, hardTimeout)
	cmds["testgroup"] = cmdTestgroup
	cmds["testuser"] = cmdTestuser
	cmds["notifysocket"] = cmdNotifySocket
	return cmds
}

// notifysocket VAR FILE: listen on a datagram socket, as systemd's
// NOTIFY_SOCKET (sd_notify(3)); set $VAR to its path and append each
// message received to FILE, one line each, until the script ends.
func cmdNotifySocket(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: notifysocket VAR FILE")
	}
	path := ts.MkAbs(args[0] + ".notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	ts.Check(err)
	out, err := os.OpenFile(ts.MkAbs(args[1]), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	ts.Check(err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			out.Write(append(bytes.TrimRight(buf[:n], "\n"), '\n'))
		}
	}()
	ts.Defer(func() {
		c.Close()
		<-done
		out.Close()
	})
	ts.Setenv(args[0], path)
}

// scriptCondition adds [root]: the script runs as root, and [pidscg]: it
// may make a pids cgroup (v1's pids hierarchy, or v2 with the pids
// controller enabled for children of the root).
func scriptCondition(cond string) (bool, error) {
	switch cond {
	case "root":
		return os.Geteuid() == 0, nil
	case "pidscg":
		if os.Geteuid() != 0 {
			return false, nil
		}
		if unix.Access("/sys/fs/cgroup/pids/cgroup.procs", unix.W_OK) == nil {
			return true, nil
		}
		b, _ := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control")
		return slices.Contains(strings.Fields(string(b)), "pids"), nil
	}
	return false, fmt.Errorf("unknown condition %q", cond)
}

var throwaways atomic.Int32

// throwawayName is a user or group name unique to this run and call (scripts
// run in parallel), at most 32 bytes.
func throwawayName(v string) string {
	return fmt.Sprintf("lr-ts%d-%d-%.8s", os.Getpid()%100000, throwaways.Add(1), v)
}

// testgroup VAR: as root, create a throwaway group (removed when the script
// ends). Sets $VAR (the name) and $VAR_gid.
func cmdTestgroup(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: testgroup VAR")
	}
	name := throwawayName(args[0])
	exec.Command("groupdel", name).Run() // left by an interrupted run
	if out, err := exec.Command("groupadd", "--system", name).CombinedOutput(); err != nil {
		ts.Fatalf("groupadd: %v: %s", err, out)
	}
	ts.Defer(func() { exec.Command("groupdel", name).Run() })
	g, err := user.LookupGroup(name)
	ts.Check(err)
	ts.Setenv(args[0], name)
	ts.Setenv(args[0]+"_gid", g.Gid)
}

// testuser VAR [GROUP]: as root, create a throwaway user (removed when the
// script ends) with a private primary group, GROUP as a supplementary one if
// given, and the home $WORK/home-VAR; make $WORK reachable by it, and copy
// the command under test to $BIN/leaderrun where it may run it. Sets $VAR
// (the name), $VAR_uid, $VAR_gid and $HOME_VAR.
func cmdTestuser(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: testuser VAR [GROUP]")
	}
	v := args[0]
	name := throwawayName(v)
	home := ts.MkAbs("home-" + v)
	exec.Command("userdel", name).Run() // left by an interrupted run
	opts := []string{"--system", "--no-create-home", "--home-dir", home, "--shell", "/usr/sbin/nologin", "--user-group"}
	if len(args) == 2 {
		opts = append(opts, "--groups", args[1])
	}
	if out, err := exec.Command("useradd", append(opts, name)...).CombinedOutput(); err != nil {
		ts.Fatalf("useradd: %v: %s", err, out)
	}
	ts.Defer(func() {
		// -f: a background process of the user may still be exiting
		// when a failed script's deferred functions run.
		if out, err := exec.Command("userdel", "-f", name).CombinedOutput(); err != nil {
			ts.Logf("userdel %s: %v: %s", name, err, out)
		}
	})
	u, err := user.Lookup(name)
	ts.Check(err)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	ts.Check(os.Mkdir(home, 0o700))
	ts.Check(os.Chown(home, uid, gid))
	for d := ts.MkAbs("."); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		ts.Check(os.Chmod(d, 0o755))
	}
	bin := ts.MkAbs("bin")
	if _, err := os.Stat(filepath.Join(bin, "leaderrun")); err != nil {
		ts.Check(os.MkdirAll(bin, 0o755))
		exe, err := os.Executable()
		ts.Check(err)
		b, err := os.ReadFile(exe)
		ts.Check(err)
		ts.Check(os.WriteFile(filepath.Join(bin, "leaderrun"), b, 0o755))
	}
	ts.Setenv(v, name)
	ts.Setenv(v+"_uid", u.Uid)
	ts.Setenv(v+"_gid", u.Gid)
	ts.Setenv("HOME_"+v, home)
	ts.Setenv("BIN", bin)
}

// hardTimeout bounds every wait of the custom commands; -t overrides it.
const hardTimeout = 10 * time.Second

// leaderrun runs the command under test outside the script, for the
// readiness commands, with the script's lock directory.
func leaderrun(ts *testscript.TestScript, args ...string) ([]byte, error) {
	cmd := exec.Command("leaderrun", args...)
	if path, err := exec.LookPath(filepath.Join(ts.Getenv("WORK"), ".installed", "leaderrun")); err == nil {
		cmd = exec.Command(path, args...) // TestInstalled
	}
	cmd.Env = append(os.Environ(), "LEADERRUN_DIR="+ts.Getenv("LEADERRUN_DIR"))
	return cmd.Output()
}

// TestReadmeRecipes fails when a code block of the Recipes section of
// docs/command.md (where the README sends readers for them) is not, byte
// for byte, a recipe* file of a testscript in testscripts/recipes/, which
// runs it.
func TestReadmeRecipes(t *testing.T) {
	b, err := os.ReadFile("docs/command.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "\n## Recipes\n")
	if start < 0 {
		t.Fatal("docs/command.md has no Recipes section")
	}
	s = s[start+1:]
	if end := strings.Index(s, "\n## "); end >= 0 {
		s = s[:end]
	}
	recipes := map[string]string{} // content -> file
	scripts, _ := filepath.Glob("testscripts/recipes/*.txtar")
	for _, f := range scripts {
		a, err := txtar.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range a.Files {
			if strings.HasPrefix(file.Name, "recipe") {
				recipes[string(file.Data)] = f + ": " + file.Name
			}
		}
	}
	blocks := 0
	for {
		i := strings.Index(s, "```")
		if i < 0 {
			break
		}
		body := s[i+3:]
		nl := strings.IndexByte(body, '\n')
		end := strings.Index(body, "```")
		if nl < 0 || end < 0 {
			t.Fatal("unterminated code block in Recipes")
		}
		block := body[nl+1 : end]
		s = body[end+3:]
		blocks++
		if _, ok := recipes[block]; !ok {
			t.Errorf("docs/command.md recipe has no testscript in testscripts/recipes/ that runs it as written:\n%s", block)
		}
	}
	if blocks < 8 {
		t.Errorf("found %d code blocks in Recipes, want at least 8", blocks)
	}
}

// TestExitCodesTested fails when a row of cmd.ExitCodes is exercised by no
// testscript (an `rc=CODE` line) and no Go test listed here.
func TestExitCodesTested(t *testing.T) {
	// Codes that need conditions a testscript cannot make (a read-only or
	// network filesystem, an internal failure), and the Go tests that make
	// them.
	goTests := map[string]string{
		"69": "cmd.TestCodeFor (ErrUnsupported, a network filesystem)",
		"70": "cmd.TestCodeFor (an unexpected error); cmd.TestBusErrorNoInternalPath",
		"73": "cmd.TestDirReadOnly, cmd.TestDirFull",
	}
	// N and 128+N are tested through examples of each.
	example := map[string]string{"N": "3", "128+N": "143"}
	var all strings.Builder
	scripts, _ := filepath.Glob("testscripts/*/*.txtar")
	for _, f := range scripts {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	text := all.String()
	for _, r := range cmd.ExitCodes {
		code := r.Code
		if e, ok := example[code]; ok {
			code = e
		}
		if strings.Contains(text, "rc="+code+"$") || strings.Contains(text, "rc="+code+"'") {
			continue
		}
		if code == "0" && strings.Contains(text, "exec leaderrun --version") {
			continue
		}
		if _, ok := goTests[code]; ok {
			continue
		}
		t.Errorf("exit code %s (%s) is tested by no testscript; add one that checks rc=%s", r.Code, r.Meaning, code)
	}
}

// TestNoCgoLinked fails when the leaderrun binary, built without tags
// where a C compiler is found (CGO_ENABLED=1), links runtime/cgo or a
// package whose cgo half every start would pay for: the dynamic loader and
// cgo's initialisation (issue 24). net (the bus's sockets are raw
// descriptors) and os/user (internal/userdb reads the user database) are
// the ones that had it.
func TestNoCgoLinked(t *testing.T) {
	list := exec.Command("go", "list", "-deps", ".")
	list.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch pkg {
		case "runtime/cgo", "net", "os/user":
			t.Errorf("the binary links %s", pkg)
		}
	}
}

// TestNoManPageCodeLinked fails when the leaderrun binary, built without
// tags, links a man-page or Markdown package (urfave/cli's docs.go brings
// go-md2man and blackfriday, whose initialisation every start pays for) or
// the manual's generator.
func TestNoManPageCodeLinked(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, bad := range []string{"github.com/cpuguy83/go-md2man", "github.com/russross/blackfriday", "github.com/urfave/cli-docs", "github.com/urfave/cli/v2", "github.com/leaderrun/leaderrun/internal/man"} {
			if strings.HasPrefix(pkg, bad) {
				t.Errorf("the binary links %s", pkg)
			}
		}
	}
}
