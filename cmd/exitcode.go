package cmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/oslock"
)

// Exit codes are a contract with the scripts that run leaderrun: keep the
// numbers. They follow sysexits.h where one fits. COMMAND's own status is
// passed through unchanged, so a command may also exit with any of these.
const (
	ExitOK          = 0   // COMMAND succeeded; who: a leader exists
	ExitNoLeader    = 1   // who: nobody leads the name; publish: nobody serves its bus, or its leader is stopped
	ExitUsage       = 64  // bad flag, bad name, no COMMAND, a nested leaderrun of the same lock (EX_USAGE)
	ExitDataErr     = 65  // a file of the lock directory holds what leaderrun did not write: elect.ErrCorrupt (EX_DATAERR)
	ExitUnavailable = 69  // the lock directory cannot be locked: unsupported or network filesystem (EX_UNAVAILABLE)
	ExitSoftware    = 70  // leaderrun itself failed unexpectedly (EX_SOFTWARE)
	ExitOSErr       = 71  // a system limit ran out: file descriptors, memory, processes at fork (EX_OSERR)
	ExitCantCreate  = 73  // the lock directory's filesystem is read-only or full (EX_CANTCREAT, as flock(1))
	ExitConflict    = 75  // default for -n and -w: another instance leads (EX_TEMPFAIL); see -E
	ExitNoPerm      = 77  // insecure, missing, not a directory, or inaccessible lock directory (EX_NOPERM)
	ExitStolen      = 79  // leadership was stolen (--steal) and COMMAND was stopped
	ExitLockLost    = 80  // the lock file was removed or replaced under the leader and COMMAND was stopped
	ExitNoExec      = 126 // COMMAND exists but cannot be executed
	ExitNotFound    = 127 // COMMAND was not found
	ExitSignalBase  = 128 // 128+N: COMMAND (or leaderrun while waiting) died of signal N
)

// ExitCodes is the one table of exit statuses: `leaderrun --help`, the
// manual (docs/leaderrun.1) and docs/command.md's "Exit status" section are
// made from it, and a test checks that every row is exercised.
var ExitCodes = []ExitCodeRow{
	{"N", "COMMAND's own exit status, passed through"},
	{"128+N", "COMMAND died of signal N (or leaderrun got signal N while waiting in line)"},
	{"0", "COMMAND succeeded; who: NAME is led; --version, --help"},
	{"1", "who: nobody leads NAME; publish: nobody serves NAME's bus, or its leader is stopped (SIGSTOP) and cannot answer"},
	{"64", "usage error: a bad or empty flag, a bad name, no COMMAND, an unknown subcommand or help topic, a word such as version that is no subcommand; or COMMAND ran leaderrun again for the name and directory its own leaderrun holds (it would wait for itself for ever); over a backend across hosts: a --grace that does not fit --ttl, or a request its server refuses as too large (a long prefix, name, message or COMMAND line)"},
	{"65", "a file in the lock directory is not what leaderrun made there: garbage in a state file; a FIFO, socket, directory, device node or symbolic link under the name of a lock file, state file, queue directory or ticket; a stray queue entry. Nothing was changed; the message names it and how to recover; over a backend across hosts: more of a name's entries on its server than it tolerates are not leaderrun's (fewer are ignored, and status names them)"},
	{"69", "the lock directory cannot be locked (unsupported or network filesystem; see --allow-unsafe-fs); a flag that hands the command line over to another backend's program: that program is not installed; over a backend across hosts: its server cannot be reached (the message names each endpoint and why: refused, a certificate problem, the wrong scheme), or cannot serve (no quorum) a request that cannot wait (-n, status)"},
	{"70", "leaderrun itself failed unexpectedly"},
	{"71", "a system limit ran out: file descriptors (EMFILE, ENFILE), memory, or processes at fork (EAGAIN), also a pids cgroup (TasksMax=) with too few tasks left when leaderrun starts; COMMAND itself is fine"},
	{"73", "the lock directory's filesystem is read-only or full (blocks or inodes): nothing can be created there (as flock(1)'s 73); also a home where the default directory cannot be created for that reason (ProtectHome=read-only)"},
	{"75", "-n/-w: another instance leads (change it with -E); --single-instance, send: the primary did not accept within --ack-timeout (the line names its pid and state)"},
	{"76", "--single-instance, send: the primary accepted the arguments and ended before answering; they were not run again"},
	{"77", "the lock directory is insecure, missing (also removed while in use), not a directory, or inaccessible (also its permission taken away while this instance led, such as chmod 000; COMMAND was stopped); the default directory cannot be created under a directory of another user (a ~/.local of root's); --single-instance, send: the primary runs as another user; over a backend across hosts: its server refused the user or its password (authentication), or a permission the backend needs"},
	{"79", "leadership was stolen (--steal) and COMMAND was stopped"},
	{"80", "the lock file was removed or replaced while this instance led; COMMAND was stopped (the next leader waits until it is gone); over a backend across hosts: the term's lease was lost (not renewed in time, or revoked) and COMMAND was stopped (a waiting instance that loses its session queues again; with -n it exits 80)"},
	{"126", "COMMAND is not executable, or is a directory"},
	{"127", "COMMAND was not found (a shell builtin such as cd needs sh -c)"},
}

// ExitCodeRow is one exit status and what it means.
type ExitCodeRow struct{ Code, Meaning string }

// exitCodeHelp is ExitCodes as listed in `leaderrun --help`.
func exitCodeHelp() string {
	var b strings.Builder
	b.WriteString("EXIT STATUS:\n")
	for _, r := range ExitCodes {
		line := fmt.Sprintf("   %-6s ", r.Code)
		for _, w := range strings.Fields(r.Meaning) {
			if len(line)+1+len(w) > 78 {
				b.WriteString(strings.TrimRight(line, " ") + "\n")
				line = strings.Repeat(" ", 10)
			} else if !strings.HasSuffix(line, " ") {
				line += " "
			}
			line += w
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// exitError carries an exit code and a message for stderr. An empty
// message prints nothing: COMMAND already said what it had to say.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }
func (e *exitError) ExitCode() int { return e.code }

func exitf(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

// Exitf is an error that ends the command line with code (one of
// ExitCodes) and prints the message as it is: for a backend (an Opener)
// whose errors already say what was wrong and what to do.
func Exitf(code int, format string, args ...any) error { return exitf(code, format, args...) }

// silentExit ends leaderrun with code and no message.
func silentExit(code int) error { return &exitError{code: code} }

// usageErrorf reports a usage error; the message should say what to do.
func usageErrorf(format string, args ...any) error { return exitf(ExitUsage, format, args...) }

// ExitCode maps the error returned by the app to the process exit status.
// It is the only place that decides a code for an error that does not carry
// one.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee interface{ ExitCode() int }
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return codeFor(err)
}

func codeFor(err error) int {
	switch {
	case errors.Is(err, elect.ErrInvalidName), errors.Is(err, elect.ErrInvalidRequest):
		return ExitUsage
	case errors.Is(err, elect.ErrCorrupt), errors.Is(err, oslock.ErrForeignEntry), errors.Is(err, oslock.ErrSymlink):
		return ExitDataErr
	case isForeignOpen(err):
		return ExitDataErr // foreign.go
	case errors.Is(err, elect.ErrUnsupported), errors.Is(err, elect.ErrUnavailable):
		return ExitUnavailable
	case errors.Is(err, elect.ErrInsecureDir), errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission), errors.Is(err, elect.ErrForeignHolder):
		return ExitNoPerm
	case errors.Is(err, elect.ErrBusy), errors.Is(err, context.DeadlineExceeded):
		return ExitConflict
	case errors.Is(err, elect.ErrStolen):
		return ExitStolen
	case errors.Is(err, elect.ErrLockLost), errors.Is(err, elect.ErrSessionLost):
		return ExitLockLost
	case errors.Is(err, syscall.ENAMETOOLONG):
		return ExitUsage // a lock directory path no filesystem takes
	case errors.Is(err, syscall.EROFS), errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return ExitCantCreate
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE), errors.Is(err, syscall.ENOMEM):
		return ExitOSErr
	}
	return ExitSoftware
}

func isForeignOpen(err error) bool { _, ok := foreignOpen(err); return ok }

// classify turns an error from the election layer into an exitError with a
// message that says what to do about it, for an explicit lock directory.
func classify(err error) error { return classifyIn(err, true) }

// classifyIn is classify for a lock directory given with --dir or
// LEADERRUN_DIR (explicit) or the default one.
func classifyIn(err error, explicit bool) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	code := codeFor(err)
	msg, hint := err.Error(), ""
	if pe, ok := foreignOpen(err); ok {
		return &exitError{code: code, err: &messageError{msg: foreignMessage(pe), err: err}}
	}
	// oslock's advice for a directory of another user is to leave --dir
	// unset: said once, and not for the default directory, where the
	// user did just that.
	const otherOwner = "; use a directory you own, e.g. leave --dir unset for the private default"
	switch {
	case code == ExitUnavailable:
		hint = " (with --dir or LEADERRUN_DIR)"
	case code == ExitNoPerm && explicit && !strings.Contains(msg, "leave --dir unset"):
		hint = ", or leave --dir and LEADERRUN_DIR unset to use the private default"
	case code == ExitNoPerm && !explicit && strings.Contains(msg, otherOwner):
		msg = strings.Replace(msg, otherOwner, "", 1)
		hint = "; the default directory must be yours: have it removed and run leaderrun again, or give a private directory of your own with --dir DIR (mkdir -m 700 DIR)"
	case code == ExitNoPerm && !explicit:
		hint = "; or give a private directory of your own with --dir DIR (mkdir -m 700 DIR)"
	}
	return &exitError{code: code, err: &messageError{msg: "leaderrun: " + msg + hint, err: err}}
}

// messageError is err with the message the command prints for it.
type messageError struct {
	msg string
	err error
}

func (e *messageError) Error() string { return e.msg }
func (e *messageError) Unwrap() error { return e.err }

func printErr(err error) {
	if msg := userMessage(err.Error()); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
	}
}

// userMessage is msg without the package prefixes of the library's errors
// ("elect: ", "oslock: ", "bus: "), which mean nothing to a user of the
// command, and on one line.
func userMessage(msg string) string {
	for _, p := range []string{"elect: ", "oslock: ", "bus: "} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	return strings.ReplaceAll(strings.TrimRight(msg, "\n"), "\n", "; ")
}
