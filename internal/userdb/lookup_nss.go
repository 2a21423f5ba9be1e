//go:build unix && !darwin

package userdb

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// The files and the program, variables for tests.
var (
	passwdFile   = "/etc/passwd"
	nsswitchFile = "/etc/nsswitch.conf"
	getentPaths  = []string{"/usr/bin/getent", "/bin/getent"}
)

func lookup(uid int) (User, error) {
	sources := passwdSources()
	if sources[0] == "files" {
		u, err := lookupFile(uid)
		if !errors.Is(err, ErrUnknown) || len(sources) == 1 {
			return u, err
		}
	}
	u, err := lookupGetent(uid)
	if errors.Is(err, errNoGetent) {
		return lookupFile(uid)
	}
	return u, err
}

// passwdSources is the list of services of nsswitch.conf's passwd line,
// without the [STATUS=action] items: ["files"] where there is no such
// file (musl has no NSS) or no such line (glibc's default then).
func passwdSources() []string {
	b, err := os.ReadFile(nsswitchFile)
	if err != nil {
		return []string{"files"}
	}
	for line := range strings.Lines(string(b)) {
		line, _, _ = strings.Cut(line, "#")
		db, list, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(db) != "passwd" {
			continue
		}
		var sources []string
		inAction := false
		for _, f := range strings.Fields(list) {
			switch {
			case strings.HasPrefix(f, "["):
				inAction = !strings.HasSuffix(f, "]")
			case inAction:
				inAction = !strings.HasSuffix(f, "]")
			default:
				sources = append(sources, f)
			}
		}
		if len(sources) > 0 {
			return sources
		}
	}
	return []string{"files"}
}

// lookupFile finds uid in /etc/passwd; its first entry counts, as in
// getpwuid(3).
func lookupFile(uid int) (User, error) {
	b, err := os.ReadFile(passwdFile)
	if err != nil {
		return User{}, err
	}
	for line := range bytes.Lines(b) {
		if u, ok := parseEntry(line, uid); ok {
			return u, nil
		}
	}
	return User{}, ErrUnknown
}

// parseEntry reads one passwd(5) line, name:password:uid:gid:gecos:home:shell,
// and reports whether it is uid's.
func parseEntry(line []byte, uid int) (User, bool) {
	f := strings.Split(strings.TrimRight(string(line), "\r\n"), ":")
	if len(f) < 7 || f[0] == "" || f[0][0] == '#' {
		return User{}, false
	}
	if n, err := strconv.Atoi(f[2]); err != nil || n != uid {
		return User{}, false
	}
	return User{Name: f[0], Home: f[5]}, true
}

var errNoGetent = errors.New("userdb: getent(1) not found")

// lookupGetent asks the C library's name service switch, through getent,
// for uid: getent passwd UID calls getpwuid(3) and prints the entry.
func lookupGetent(uid int) (User, error) {
	path := ""
	for _, p := range getentPaths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			path = p
			break
		}
	}
	if path == "" {
		return User{}, errNoGetent
	}
	cmd := exec.Command(path, "passwd", uidKey(uid))
	cmd.Env = []string{} // the answer must not depend on the environment
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == 2: // key not found
		return User{}, ErrUnknown
	case err != nil:
		return User{}, fmt.Errorf("userdb: %s passwd %d: %w", path, uid, err)
	}
	for line := range bytes.Lines(out) {
		if u, ok := parseEntry(line, uid); ok {
			return u, nil
		}
	}
	return User{}, ErrUnknown
}
