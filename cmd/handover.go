package cmd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/urfave/cli/v3"
)

// leaderrun over etcd is a program of its own, leaderrun-etcd, so that
// this binary never links the etcd client and gRPC. The plain leaderrun
// hands a command line that names --etcd-endpoints over to it, as git
// does with git-NAME: the same flags, subcommands, exit codes and output,
// over the cluster. The environment variable LEADERRUN_ETCD_ENDPOINTS
// alone does not switch: a cron job and a login shell, whose environments
// differ, would then elect over two different backends and both run.
const (
	handoverFlag    = "etcd-endpoints"
	handoverProgram = "leaderrun-etcd"
)

func handoverFlagDef() cli.Flag {
	return &cli.StringFlag{
		Name:  handoverFlag,
		Usage: "elect over the etcd cluster at `URLS` (comma-separated), across hosts: hands the whole command line to " + handoverProgram + " (next to leaderrun, else on PATH), which adds --etcd-prefix, --ttl, --host and etcdctl's TLS flags",
	}
}

// handOver replaces this process with leaderrun-etcd when args name
// --etcd-endpoints before any `--`; it returns only when they do not. When
// leaderrun-etcd cannot be found or run, it exits 69 and says how to
// install it.
func handOver(args []string) {
	if !namesHandover(args) {
		return
	}
	path, err := findHandover()
	if err == nil {
		argv := append([]string{handoverProgram}, args[1:]...)
		err = syscall.Exec(path, argv, os.Environ())
	}
	printErr(exitf(ExitUnavailable, "leaderrun: --%s needs %s, which %v; build it from leaderrun's source (cd etcd && go install ./cmd/%s), or drop --%s to elect on this host only",
		handoverFlag, handoverProgram, err, handoverProgram, handoverFlag))
	os.Exit(ExitUnavailable)
}

// namesHandover reports whether --etcd-endpoints is among leaderrun's own
// flags or a subcommand's: before a `--`, and not the value of another
// flag.
func namesHandover(args []string) bool {
	takesValue := takesValueOf(append(runFlags(), singleFlags()...))
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return false
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "--") && strings.HasPrefix(a, "-") && len(name) > 1 {
			name = name[len(name)-1:] // a short group: its last flag may take a value
		}
		switch {
		case !strings.HasPrefix(a, "-"):
		case name == handoverFlag:
			return true
		case takesValue[name] && !hasValue:
			i++
		}
	}
	return false
}

// findHandover looks for leaderrun-etcd next to this executable, then on
// PATH.
func findHandover() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), handoverProgram)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath(handoverProgram)
	if err != nil {
		return "", fmt.Errorf("is neither next to leaderrun nor on PATH")
	}
	return p, nil
}
