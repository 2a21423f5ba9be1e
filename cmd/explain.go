package cmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/userdb"
	"github.com/urfave/cli/v3"
)

// explainIn is classify for an error met while using the lock directory
// dir (explicit: named by --dir or LEADERRUN_DIR, not the default). What
// the directory is now says more than the syscall that tripped on it: a
// directory that is gone or is not a directory, a read-only or full
// filesystem, or a process out of descriptors each get their code and one
// line that says what to do, instead of 70 and a bare syscall message.
func explainIn(dir string, explicit bool, err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	switch codeFor(err) {
	case ExitUsage, ExitDataErr, ExitUnavailable, ExitConflict, ExitStolen:
		return classifyIn(err, explicit)
	}
	if e := resourceError(err); e != nil {
		return e
	}
	if e := missingDir(dir, explicit); e != nil {
		return e
	}
	if e := sharedDirError(dir, explicit, err); e != nil {
		return e
	}
	if e := unwritableDir(dir, err); e != nil {
		return e
	}
	return classifyIn(err, explicit)
}

// missingDir is the exit for a lock directory dir that is no directory,
// or is not there; nil when it is one, or dir is "".
func missingDir(dir string, explicit bool) error {
	if dir == "" {
		return nil
	}
	fi, lerr := os.Lstat(dir)
	switch {
	case errors.Is(lerr, syscall.ENOTDIR), lerr == nil && fi.Mode()&fs.ModeSymlink == 0 && !fi.IsDir():
		return exitf(ExitNoPerm, "leaderrun: the lock directory %s is not a directory (or a parent of it is not); give a directory (mkdir -m 700 DIR) with --dir or LEADERRUN_DIR", dir)
	case errors.Is(lerr, fs.ErrNotExist) && explicit:
		return exitf(ExitNoPerm, "leaderrun: the lock directory %s does not exist (or was removed while in use); create it with mkdir -m 700 %s, or leave --dir and LEADERRUN_DIR unset to use the private default", dir, dir)
	case errors.Is(lerr, fs.ErrNotExist):
		if e := uncreatable(dir); e != nil {
			return e
		}
		return exitf(ExitNoPerm, "leaderrun: the lock directory %s does not exist (removed while in use?); run leaderrun again to create it, or give one with --dir", dir)
	}
	return nil
}

// unwritableDir is the exit for err, a write refused because dir's
// filesystem is read-only or full; nil for another error.
func unwritableDir(dir string, err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return nil
	}
	switch errno {
	case syscall.EROFS:
		return exitf(ExitCantCreate, "leaderrun: cannot write in the lock directory %s: its filesystem is read-only; give a writable directory with --dir or LEADERRUN_DIR", dir)
	case syscall.ENOSPC, syscall.EDQUOT:
		return exitf(ExitCantCreate, "leaderrun: cannot write in the lock directory %s: its filesystem is full (%s); free some space, or give another directory with --dir or LEADERRUN_DIR", dir, errno)
	}
	return nil
}

// explainCtx is explainIn for the lock directory c names, or the default.
func explainCtx(c *cli.Command, err error) error {
	dir := lockDir(c)
	if dir == "" {
		return explainIn(elect.DefaultDir(), false, err)
	}
	return explainIn(dir, true, err)
}

// resourceError explains a process or system limit that ran out (EMFILE,
// ENFILE, ENOMEM): 71, EX_OSERR, which sysexits(3) reserves for "cannot
// fork", "cannot create pipe" and the like. Not 75 (EX_TEMPFAIL), which
// scripts read as "another instance leads" and skip, nor 126, which says
// COMMAND cannot be executed. Nil for other errors.
func resourceError(err error) error {
	if msg := resourceMsg(err); msg != "" {
		return exitf(ExitOSErr, "leaderrun: %s", msg)
	}
	return nil
}

// startFailure maps a failed start of COMMAND: a limit that ran out is
// 71, as in resourceError, and so is EAGAIN from fork (too many processes
// for ulimit -u or the cgroup's pids.max); else 126 or 127 (startError).
func startFailure(name string, err error) error {
	if msg := resourceMsg(err); msg != "" {
		return exitf(ExitOSErr, "leaderrun: cannot start %s: %s", name, msg)
	}
	if errors.Is(err, syscall.EAGAIN) {
		return exitf(ExitOSErr, "leaderrun: cannot start %s: too many processes (EAGAIN: ulimit -u, or the cgroup's pids.max); try again later, or raise the limit", name)
	}
	return startError(name, err)
}

func resourceMsg(err error) string {
	switch {
	case errors.Is(err, syscall.EMFILE):
		return "out of file descriptors (EMFILE: this process's limit, ulimit -n); raise ulimit -n and try again"
	case errors.Is(err, syscall.ENFILE):
		return "the system is out of file descriptors (ENFILE: fs.file-max); close some programs or raise fs.file-max, and try again"
	case errors.Is(err, syscall.ENOMEM):
		return "out of memory (ENOMEM); free some memory and try again"
	}
	return ""
}

// sharedDirError explains a lock directory given with --dir that others
// (or its group) may write to, without advising to chmod it: such a
// directory (/tmp, a project's shared tree) is seldom leaderrun's to
// change, and chmod o-w /tmp would break the system. The advice is a
// private subdirectory of a sticky directory (/tmp, /var/tmp, /run/lock:
// shared by design, never chmod'ed), a private directory elsewhere
// otherwise, and chmod only for a directory that is leaderrun's alone. Nil for other errors, and for the default
// directory, which is leaderrun's own.
func sharedDirError(dir string, explicit bool, err error) error {
	if !explicit || dir == "" || !errors.Is(err, elect.ErrInsecureDir) {
		return nil
	}
	fi, lerr := os.Lstat(dir)
	if lerr != nil || !fi.IsDir() {
		return nil
	}
	uid, perm, ok := ownerOf(fi)
	if !ok || uid != os.Geteuid() && os.Geteuid() != 0 {
		return nil // owned by another user: oslock's message says so
	}
	who := ""
	switch {
	case perm&0o002 != 0:
		who = "others"
	case perm&0o020 != 0:
		who = "its group"
	default:
		return nil
	}
	sub := filepath.Join(dir, "leaderrun-"+strconv.Itoa(os.Geteuid()))
	msg := fmt.Sprintf("leaderrun: insecure lock directory: %s is writable by %s (mode %04o), who could tamper with its lock files; ", dir, who, perm)
	if perm&0o1000 != 0 {
		msg += fmt.Sprintf("it is a shared directory, not leaderrun's: leave its mode alone and give a private subdirectory instead: mkdir -m 700 %s, then --dir %s", sub, sub)
	} else {
		// Not a subdirectory: where others may rename entries (no sticky
		// bit), they could move it away.
		msg += fmt.Sprintf("give a private directory of your own instead (mkdir -m 700 DIR, then --dir DIR; or leave --dir unset for the private default), or, only if %s is for leaderrun alone, chmod 700 %s", dir, dir)
	}
	if who == "its group" {
		msg += "; or add --group-shared for a directory one group shares on purpose"
	}
	return &exitError{code: ExitNoPerm, err: &messageError{msg: msg, err: err}}
}

// uncreatable explains why the default lock directory dir, which
// leaderrun creates with the missing directories above it (.local,
// .local/state), cannot be created: it tries the first missing one again
// and names what is in the way, the path and the cause. A read-only
// filesystem (ProtectHome=read-only, a read-only mount) or a full one
// (blocks or inodes) is 73; a parent that is another user's (a ~/.local
// made by sudo pip install --user) or not writable is 77, naming the
// owner. Running again would change nothing. Nil when the directory
// could be made now, or nothing is missing.
func uncreatable(dir string) error {
	missing := dir
	for {
		parent := filepath.Dir(missing)
		if parent == missing {
			return nil
		}
		if _, err := os.Lstat(parent); err == nil {
			break
		}
		missing = parent
	}
	parent := filepath.Dir(missing)
	err := os.Mkdir(missing, 0o700)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return nil // made now: running again creates the rest
	}
	const fix = "give a private directory of your own with --dir DIR or LEADERRUN_DIR (mkdir -m 700 DIR)"
	switch {
	case errors.Is(err, syscall.EROFS):
		return exitf(ExitCantCreate, "leaderrun: cannot create the default lock directory %s: %s is on a read-only filesystem (a read-only mount, or ProtectHome=read-only); %s", dir, parent, fix)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return exitf(ExitCantCreate, "leaderrun: cannot create the default lock directory %s: the filesystem of %s is full (%v: no space or no inodes left; see df -h and df -i); free some, or %s", dir, parent, errnoOf(err), fix)
	case errors.Is(err, fs.ErrPermission):
		fi, serr := os.Stat(parent)
		if serr != nil {
			break
		}
		uid, mode, ok := ownerOf(fi)
		if !ok {
			break
		}
		if uid != os.Geteuid() {
			return exitf(ExitNoPerm, "leaderrun: cannot create the default lock directory %s: %s is owned by %s, not by you, so you cannot create %s in it (a sudo pip install --user can do that to ~/.local); have it given back to you (sudo chown %s %s), or %s",
				dir, parent, userName(uid), filepath.Base(missing), loginName(os.Geteuid()), parent, fix)
		}
		return exitf(ExitNoPerm, "leaderrun: cannot create the default lock directory %s: %s is not writable (mode %04o); %s", dir, parent, mode, fix)
	}
	return exitf(ExitNoPerm, "leaderrun: cannot create the default lock directory %s: %v; %s", dir, err, fix)
}

func errnoOf(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}

// userName is uid's name and number ("root (uid 0)"), or the number.
func userName(uid int) string {
	if u, err := userdb.Lookup(uid); err == nil {
		return fmt.Sprintf("%s (uid %d)", u.Name, uid)
	}
	return fmt.Sprintf("uid %d", uid)
}

// loginName is uid's name, or its number, for a command line.
func loginName(uid int) string {
	if u, err := userdb.Lookup(uid); err == nil {
		return u.Name
	}
	return strconv.Itoa(uid)
}
