package cmd

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"strings"

	"github.com/leaderrun/leaderrun/supervise"
)

// checkCommand resolves COMMAND before the lock is requested, so that a typo
// fails at once with 127 (or 126) instead of after waiting in line. dashed
// says COMMAND followed --: without it, a word that is close to a
// subcommand's name is taken for a misspelt subcommand (64).
func checkCommand(name string, dashed bool) error {
	path, err := supervise.LookPath(name)
	if err == nil {
		return nil
	}
	if fi, serr := os.Stat(name); strings.Contains(name, "/") && serr == nil && fi.IsDir() {
		return exitf(ExitNoExec, "leaderrun: %s is a directory, not a program; give the program to run after --", name)
	}
	switch {
	case errors.Is(err, exec.ErrDot):
		return exitf(ExitNotFound, "leaderrun: %s resolves to %s in the current directory, which PATH lookups refuse; write ./%s", name, path, name)
	case errors.Is(err, fs.ErrPermission):
		return exitf(ExitNoExec, "leaderrun: %s is not executable; chmod +x it, or run it through its interpreter (leaderrun -- sh %s)", name, name)
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		if shellBuiltin(name) {
			return exitf(ExitNotFound, "leaderrun: %s is a shell builtin, not a program; run it through a shell: leaderrun -- sh -c '%s ...'", name, name)
		}
		if isSubcommand(name) {
			return exitf(ExitNotFound, "leaderrun: %s: command not found; to run the %s command, write leaderrun %s without --", name, name, name)
		}
		if s := suggestSubcommand(name); s != "" && !dashed {
			return usageErrorf("leaderrun: %q is neither a subcommand nor a program on $PATH; did you mean leaderrun %s?", name, s)
		}
		return exitf(ExitNotFound, "leaderrun: %s: command not found; check the spelling and $PATH", name)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return exitf(ExitNoExec, "leaderrun: cannot execute %s: %v", name, pe.Err)
	}
	return exitf(ExitNotFound, "leaderrun: %v", err)
}

// shellBuiltin reports whether name is a POSIX shell's special or regular
// builtin that has no program of its own on most systems.
func shellBuiltin(name string) bool {
	switch name {
	case "cd", "export", "source", ".", "alias", "unalias", "set", "unset", "exit", "exec", "eval",
		"ulimit", "umask", "readonly", "shift", "trap", "return", "wait", "jobs", "fg", "bg", "local", "declare", "typeset":
		return true
	}
	return false
}

// suggestSubcommand is the subcommand name one edit (or a swap) away from
// word, or "".
func suggestSubcommand(word string) string {
	for _, c := range commands() {
		if oneEdit(word, c.Name) {
			return c.Name
		}
	}
	return ""
}

// oneEdit reports whether a and b differ by one insertion, deletion,
// substitution or swap of neighbours.
func oneEdit(a, b string) bool {
	if a == b {
		return false
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	if len(b)-len(a) > 1 {
		return false
	}
	i := 0
	for i < len(a) && a[i] == b[i] {
		i++
	}
	if len(a) == len(b) {
		return a[i+1:] == b[i+1:] || (i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:])
	}
	return a[i:] == b[i+1:]
}

// startError maps a failed start to 126 or 127.
func startError(name string, err error) error {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return exitf(ExitNotFound, "leaderrun: %s: command not found: %v", name, err)
	default:
		return exitf(ExitNoExec, "leaderrun: cannot execute %s: %v", name, err)
	}
}
