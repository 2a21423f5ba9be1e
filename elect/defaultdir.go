package elect

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/leaderrun/leaderrun/internal/userdb"
	"github.com/leaderrun/leaderrun/oslock"
)

// FallbackBase is the directory under which a user without a usable home
// gets the default lock directory FallbackBase/leaderrun-<uid>. /run/lock
// (the FHS /var/lock) is on local tmpfs, writable by everyone with the
// sticky bit on Debian and Ubuntu, untouched by PrivateTmp=, by logind at
// logout (RemoveIPC= clears only /dev/shm and IPC objects) and by
// systemd-tmpfiles ageing; it is emptied only at boot. Where users may not
// create entries in it (Fedora and Arch make it 0755 root; macOS and the
// BSDs have none), such a user must configure a directory.
const FallbackBase = "/run/lock"

// Test hooks; the real values are the only ones outside tests.
var (
	lookupHome   = passwdHome
	fallbackBase = FallbackBase
)

// passwdHome is uid's home directory from the user database, as the C
// library's getpwuid(3) gives it (internal/userdb).
func passwdHome(uid int) (string, error) {
	u, err := userdb.Lookup(uid)
	if err != nil {
		return "", err
	}
	return u.Home, nil
}

// DefaultDir is the lock directory of the effective user when none is
// configured. It is the same for every process of that user on the
// machine, whatever their environment: it never reads $HOME, $TMPDIR or
// $XDG_*, which cron, su, sudo and systemd services set differently or not
// at all.
//
// It is <home>/.local/state/leaderrun, where <home> is the effective uid's
// home directory in the user database (the passwd entry that getpwuid(3)
// gives, so NSS users of LDAP, SSSD or systemd count as they did for
// builds through os/user with cgo: /etc/passwd is read, and the C library
// is asked through getent(1) only when nsswitch.conf's passwd line may
// give another answer; see internal/userdb; a CGO_ENABLED=0 build before
// this one, as the Debian package was, read /etc/passwd only), and
// DefaultDir creates <home>/.local and <home>/.local/state (mode 0700) where
// they are missing so that [Open] can create the last element (mode 0700).
// It is FallbackBase/leaderrun-<uid> (/run/lock/leaderrun-<uid>) instead
// when, and only when, one of these holds:
//
//   - the uid has no entry in the user database;
//   - the entry's home is not an absolute path, or is "/";
//   - the home does not exist (as for nobody's /nonexistent and system
//     users made without a home), or is not a directory owned by the uid
//     (a system user whose home is a directory of root's);
//   - the home is on a filesystem [Open] refuses (NFS, SMB/CIFS, FUSE, ...),
//     whatever Config.AllowUnsafeFS says.
//
// These are facts about the user database and the machine's filesystems,
// the same from every environment. A home that exists and is the user's but
// cannot be written (ProtectHome=read-only, a read-only mount, an encrypted
// home that is not mounted) is not a reason to fall back: Open then fails
// with an error, because processes that see the home differently would
// otherwise use two directories and both lead.
func DefaultDir() string {
	dir, _ := defaultDir(os.Geteuid())
	return dir
}

// defaultDir returns the default directory of uid and, when it is the
// fallback, why.
func defaultDir(uid int) (dir string, why error) {
	home, why := usableHome(uid)
	if why != nil {
		return filepath.Join(fallbackBase, "leaderrun-"+strconv.Itoa(uid)), why
	}
	state := filepath.Join(home, ".local", "state")
	// XDG base directories are created 0700 when missing. Errors show
	// up where Open cannot create or open the last element.
	os.Mkdir(filepath.Join(home, ".local"), 0o700)
	os.Mkdir(state, 0o700)
	return filepath.Join(state, "leaderrun"), nil
}

// usableHome returns uid's home, or why it cannot hold the default.
func usableHome(uid int) (string, error) {
	home, err := lookupHome(uid)
	if err != nil {
		return "", fmt.Errorf("uid %d is not in the user database: %w", uid, err)
	}
	if !filepath.IsAbs(home) || filepath.Clean(home) == "/" {
		return "", fmt.Errorf("uid %d has no home directory of its own (%q)", uid, home)
	}
	home = filepath.Clean(home)
	owner, err := oslock.DirOwner(home)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("home %s of uid %d does not exist", home, uid)
	case errors.Is(err, syscall.ENOTDIR):
		return "", fmt.Errorf("home %s of uid %d is not a directory", home, uid)
	case err == nil && owner != uid:
		return "", fmt.Errorf("home %s of uid %d is owned by uid %d", home, uid, owner)
	}
	// A home we may not look at (ProtectHome=yes gives EACCES) or that
	// fails otherwise stays the answer, for the reason in DefaultDir's
	// comment: Open reports what is wrong.
	if err == nil {
		if err := oslock.CheckFS(home); errors.Is(err, oslock.ErrUnsupported) {
			return "", err
		}
	}
	return home, nil
}
