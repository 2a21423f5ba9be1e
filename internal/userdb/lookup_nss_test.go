//go:build unix && !darwin

package userdb

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPasswdSources(t *testing.T) {
	for _, c := range []struct {
		conf string // "" = no file
		want []string
	}{
		{"", []string{"files"}},
		{"group: files\n", []string{"files"}},
		{"passwd: files\n", []string{"files"}},
		{"passwd:         files systemd\ngroup: files\n", []string{"files", "systemd"}},
		{"# passwd: sss\npasswd: files [NOTFOUND=return] ldap # comment\n", []string{"files", "ldap"}},
		{"passwd: sss files\n", []string{"sss", "files"}},
		{"passwd: compat\n", []string{"compat"}},
		{"passwd: files [ NOTFOUND=return ] sss\n", []string{"files", "sss"}},
		{"passwd:\n", []string{"files"}},
	} {
		nsswitchFile = filepath.Join(t.TempDir(), "nsswitch.conf")
		if c.conf != "" {
			if err := os.WriteFile(nsswitchFile, []byte(c.conf), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if got := passwdSources(); !slices.Equal(got, c.want) {
			t.Errorf("%q: got %q, want %q", c.conf, got, c.want)
		}
	}
	nsswitchFile = "/etc/nsswitch.conf"
}

// fakeDB points the lookup at a passwd file, an nsswitch.conf and a
// getent that knows uid 5000 only and logs every call.
func fakeDB(t *testing.T, nsswitch string) (calls func() int) {
	dir := t.TempDir()
	write := func(name, s string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	log := filepath.Join(dir, "calls")
	getent := write("getent", `#!/bin/sh
echo "$*" >>`+log+`
[ "$1 $2" = "passwd 5000" ] || exit 2
echo "ldapuser:*:5000:5000:LDAP User:/home/ldapuser:/bin/sh"
`, 0o755)
	old := [3]any{passwdFile, nsswitchFile, getentPaths}
	passwdFile = write("passwd", "root:x:0:0:root:/root:/bin/bash\n#comment\nbad line\nalice:x:1000:1000:Alice,,,:/home/alice:/bin/bash\ndup:x:1000:1000::/home/dup:/bin/sh\n", 0o644)
	nsswitchFile = write("nsswitch.conf", nsswitch, 0o644)
	getentPaths = []string{filepath.Join(dir, "absent"), getent}
	t.Cleanup(func() {
		passwdFile, nsswitchFile, getentPaths = old[0].(string), old[1].(string), old[2].([]string)
	})
	return func() int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), "\n")
	}
}

// The files answer without a process wherever they come first; NSS is
// asked for what they lack only where nsswitch.conf names more, and first
// where it names something else first.
func TestLookupSources(t *testing.T) {
	for _, c := range []struct {
		nsswitch  string
		uid       int
		want      User
		wantErr   error
		wantCalls int
	}{
		{"passwd: files\n", 1000, User{"alice", "/home/alice"}, nil, 0},
		{"passwd: files\n", 5000, User{}, ErrUnknown, 0},
		{"passwd: files systemd\n", 0, User{"root", "/root"}, nil, 0},
		{"passwd: files systemd\n", 5000, User{"ldapuser", "/home/ldapuser"}, nil, 1},
		{"passwd: files sss\n", 5001, User{}, ErrUnknown, 1},
		{"passwd: sss files\n", 5000, User{"ldapuser", "/home/ldapuser"}, nil, 1},
		{"passwd: compat\n", 5000, User{"ldapuser", "/home/ldapuser"}, nil, 1},
	} {
		calls := fakeDB(t, c.nsswitch)
		got, err := Lookup(c.uid)
		if got != c.want || !errors.Is(err, c.wantErr) || calls() != c.wantCalls {
			t.Errorf("%q uid %d: got %+v, %v, %d getent calls; want %+v, %v, %d", c.nsswitch, c.uid, got, err, calls(), c.want, c.wantErr, c.wantCalls)
		}
	}
}

// Without getent the files answer.
func TestLookupNoGetent(t *testing.T) {
	fakeDB(t, "passwd: sss files\n")
	getentPaths = []string{filepath.Join(t.TempDir(), "absent")}
	if u, err := Lookup(1000); err != nil || u.Name != "alice" {
		t.Errorf("got %+v, %v; want alice from the files", u, err)
	}
}
