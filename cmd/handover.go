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
// this binary never links the etcd client and gRPC; over PostgreSQL,
// leaderrun-pg, so that it never links pgx. The plain leaderrun hands a
// command line that names --etcd-endpoints (or --pg-url) over to it, as
// git does with git-NAME: the same flags, subcommands, exit codes and
// output, over the cluster. The environment variables
// LEADERRUN_ETCD_ENDPOINTS and LEADERRUN_PG_URL alone do not switch: a
// cron job and a login shell, whose environments differ, would then
// elect over two different backends and both run.
type handover struct {
	flag, program, usage string
}

var handovers = []handover{
	{"etcd-endpoints", "leaderrun-etcd", "elect over the etcd cluster at `URLS` (comma-separated), across hosts: hands the whole command line to leaderrun-etcd (next to leaderrun, else on PATH), which adds --etcd-prefix, --ttl, --host and etcdctl's TLS flags"},
	{"pg-url", "leaderrun-pg", "elect over the PostgreSQL server at `URL` (a libpq connection string; \"\" for the PG* variables alone), across hosts: hands the whole command line to leaderrun-pg (next to leaderrun, else on PATH), which adds --pg-schema, --ttl and --host"},
}

func handoverFlagDefs() []cli.Flag {
	var out []cli.Flag
	for _, h := range handovers {
		out = append(out, &cli.StringFlag{Name: h.flag, Usage: h.usage})
	}
	return out
}

// handOver replaces this process with leaderrun-etcd (or leaderrun-pg)
// when args name --etcd-endpoints (or --pg-url) before any `--`; it
// returns only when they do not. When the program cannot be found or run,
// it exits 69 and says how to install it.
func handOver(args []string) {
	h, ok := namesHandover(args)
	if !ok {
		return
	}
	path, err := findHandover(h.program)
	if err == nil {
		argv := append([]string{h.program}, args[1:]...)
		err = syscall.Exec(path, argv, os.Environ())
	}
	module := strings.TrimPrefix(h.program, "leaderrun-")
	printErr(exitf(ExitUnavailable, "leaderrun: --%s needs %s, which %v; build it from leaderrun's source (cd %s && go install ./cmd/%s), or drop --%s to elect on this host only",
		h.flag, h.program, err, module, h.program, h.flag))
	os.Exit(ExitUnavailable)
}

// namesHandover reports which handover flag, if any, is among leaderrun's
// own flags or a subcommand's: before a `--`, and not the value of another
// flag.
func namesHandover(args []string) (handover, bool) {
	takesValue := takesValueOf(append(runFlags(), singleFlags()...))
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return handover{}, false
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "--") && strings.HasPrefix(a, "-") && len(name) > 1 {
			name = name[len(name)-1:] // a short group: its last flag may take a value
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		for _, h := range handovers {
			if name == h.flag {
				return h, true
			}
		}
		if takesValue[name] && !hasValue {
			i++
		}
	}
	return handover{}, false
}

// findHandover looks for program next to this executable, then on PATH.
func findHandover(handoverProgram string) (string, error) {
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
