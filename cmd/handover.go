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

// Handover is a backend served by a program of its own, to which the
// plain leaderrun hands a command line over, as git does with git-NAME: a
// command line that names --Flag among leaderrun's own flags or a
// subcommand's (before any `--`) runs Program instead, with the same
// arguments and environment; the same flags, subcommands, exit codes and
// output, over that backend. So this binary never links a remote
// backend's client. Only the flag switches, never an environment
// variable alone: a cron job and a login shell, whose environments
// differ, would then elect over two different backends and both run.
type Handover struct {
	// Flag is the flag's name without its dashes ("etcd-endpoints"),
	// Usage its help text, with the value's placeholder in backquotes.
	Flag, Usage string
	// Program is the program's file name, looked for next to this
	// executable, then on PATH.
	Program string
	// Install says how to get Program, for the error when it is
	// missing ("cd etcd && go install ./cmd/leaderrun-etcd").
	Install string
	// Env lists the environment variables Program reads, for --help
	// and the manual's ENVIRONMENT.
	Env []EnvRow
}

// WithHandovers makes the command line hand over to each of hs: the
// plain leaderrun's entry (main.go) lists its remote backends' programs.
func WithHandovers(hs ...Handover) Option {
	return func(a *App) { a.handovers = append(a.handovers, hs...) }
}

func (a *App) handoverFlagDefs() []cli.Flag {
	var out []cli.Flag
	for _, h := range a.handovers {
		out = append(out, &cli.StringFlag{Name: h.Flag, Usage: h.Usage})
	}
	return out
}

// environment is Environment with the variables read by the programs
// handed over to, after those leaderrun reads and before those COMMAND
// gets.
func (a *App) environment() []EnvRow {
	if a == nil {
		return Environment
	}
	var read, set []EnvRow
	for _, r := range Environment {
		if strings.HasPrefix(r.Meaning, "Set for COMMAND") {
			set = append(set, r)
		} else {
			read = append(read, r)
		}
	}
	for _, h := range a.handovers {
		read = append(read, h.Env...)
	}
	return append(read, set...)
}

// handOver replaces this process with the program of the handover whose
// flag args name; it returns only when they name none. When the program
// cannot be found or run, it exits 69 and says how to install it.
func (a *App) handOver(args []string) {
	h, ok := a.namesHandover(args)
	if !ok {
		return
	}
	path, err := findHandover(h.Program)
	if err == nil {
		argv := append([]string{h.Program}, args[1:]...)
		err = syscall.Exec(path, argv, os.Environ())
	}
	printErr(exitf(ExitUnavailable, "leaderrun: --%s needs %s, which %v; build it from leaderrun's source (%s), or drop --%s to elect on this host only",
		h.Flag, h.Program, err, h.Install, h.Flag))
	os.Exit(ExitUnavailable)
}

// namesHandover reports which handover flag, if any, is among leaderrun's
// own flags or a subcommand's: before a `--`, and not the value of another
// flag.
func (app *App) namesHandover(args []string) (Handover, bool) {
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return Handover{}, false
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "--") && strings.HasPrefix(a, "-") && len(name) > 1 {
			name = name[len(name)-1:] // a short group: its last flag may take a value
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		for _, h := range app.handovers {
			if name == h.Flag {
				return h, true
			}
		}
		if app.arity[name] && !hasValue {
			i++
		}
	}
	return Handover{}, false
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
