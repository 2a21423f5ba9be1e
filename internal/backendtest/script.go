//go:build unix

// Package backendtest is the test harness that the command lines over a
// remote backend (leaderrun-etcd, leaderrun-pg, each in a module of its
// own) share: the test binary run as the command by the scripts, the
// three simulated hosts every script gets, the runner behind
// internal/scriptcmd's readiness commands, and buildbins.
package backendtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/internal/scriptcmd"
)

// HardTimeout bounds every wait of the custom commands; -t overrides it.
const HardTimeout = 15 * time.Second

// Main is the TestMain of leaderrun-NAME's script tests: the test binary
// runs as leaderrun-NAME (cmd.Main with opts) when a script execs it as
// leaderrun or leaderrun-NAME, and as a term's watchdog when cmd
// re-executes it (/proc/self/exe, argv[0] leaderrun-watchdog, which
// testscript would not know); otherwise it runs the tests, then cleanup
// (the shared server's end), and removes what buildbins built.
// testscript.Main exits the process itself.
func Main(m *testing.M, name string, opts []cmd.Option, cleanup func()) {
	if os.Getenv("LEADERRUN_INTERNAL_ROLE") != "" {
		os.Exit(cmd.Main(opts...))
	}
	run := func() { os.Exit(cmd.Main(opts...)) }
	testscript.Main(withCleanup{m, cleanup}, map[string]func(){"leaderrun": run, "leaderrun-" + name: run})
}

type withCleanup struct {
	m       *testing.M
	cleanup func()
}

func (w withCleanup) Run() int {
	code := w.m.Run()
	if w.cleanup != nil {
		w.cleanup()
	}
	bins.remove()
	return code
}

// Hosts gives a script three simulated hosts: the lock directories $HA,
// $HB and $HC ($WORK/hostA, hostB, hostC, mode 0700), which a command
// names with --dir $HA --host A (and so on); $LEADERRUN_DIR=$HA and
// $LEADERRUN_HOST=A are the defaults.
func Hosts(env *testscript.Env) error {
	for _, h := range []string{"A", "B", "C"} {
		d := filepath.Join(env.WorkDir, "host"+h)
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
		env.Setenv("H"+h, d)
	}
	env.Setenv("LEADERRUN_DIR", filepath.Join(env.WorkDir, "hostA"))
	env.Setenv("LEADERRUN_HOST", "A")
	return nil
}

// Commands are internal/scriptcmd's commands, whose readiness checks run
// leaderrun (the test binary, on PATH) outside the script as host C with
// the script's values of vars (the backend's address and namespace), and
// buildbins for leaderrun-NAME.
func Commands(name string, vars ...string) map[string]scriptcmd.Cmd {
	run := func(ts *testscript.TestScript, args ...string) ([]byte, error) {
		c := exec.Command("leaderrun", args...)
		c.Env = append(os.Environ(), "LEADERRUN_DIR="+ts.Getenv("HC"), "LEADERRUN_HOST=C")
		for _, v := range vars {
			c.Env = append(c.Env, v+"="+ts.Getenv(v))
		}
		return c.Output()
	}
	cmds := scriptcmd.Commands(run, HardTimeout)
	cmds["buildbins"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 0 {
			ts.Fatalf("usage: buildbins")
		}
		dir, err := bins.build(name)
		ts.Check(err)
		ts.Setenv("BINS", dir)
	}
	return cmds
}

// bins is what buildbins built, once per test binary.
var bins builtBins

type builtBins struct {
	once sync.Once
	dir  string
	err  error
}

// build builds the plain leaderrun (the root module) and leaderrun-NAME
// (the module NAME beside it) once, into a directory with both/
// (leaderrun and leaderrun-NAME side by side), alone/ (leaderrun only)
// and NAMEonly/ (leaderrun-NAME only).
func (b *builtBins) build(name string) (string, error) {
	b.once.Do(func() { b.dir, b.err = buildBins(name) })
	return b.dir, b.err
}

func (b *builtBins) remove() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

func buildBins(name string) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("backendtest: no source path to find the root module from")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("the root module is not at %s: %v", root, err)
	}
	dir, err := os.MkdirTemp("", "leaderrun-"+name+"-bins-")
	if err != nil {
		return "", err
	}
	build := func(moduleDir, pkg, out string) error {
		c := exec.Command("go", "build", "-o", out, pkg)
		c.Dir = moduleDir
		if b, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
		}
		return nil
	}
	for _, sub := range []string{"both", "alone", name + "only"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			return dir, err
		}
	}
	cli := "leaderrun-" + name
	if err := build(root, ".", filepath.Join(dir, "both", "leaderrun")); err != nil {
		return dir, err
	}
	if err := build(filepath.Join(root, name), "./cmd/"+cli, filepath.Join(dir, "both", cli)); err != nil {
		return dir, err
	}
	for _, l := range [][2]string{{"both/leaderrun", "alone/leaderrun"}, {"both/" + cli, name + "only/" + cli}} {
		if err := os.Link(filepath.Join(dir, l[0]), filepath.Join(dir, l[1])); err != nil {
			return dir, err
		}
	}
	return dir, nil
}
