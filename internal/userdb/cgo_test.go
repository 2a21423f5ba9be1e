//go:build cgo && unix

package userdb

import (
	"bytes"
	"errors"
	"os"
	"os/user"
	"strconv"
	"testing"
)

// Lookup gives what os/user gives through the C library (getpwuid_r and
// NSS), for every uid of /etc/passwd, this process's and uids that have
// no entry (which this machine's nsswitch.conf may send to getent).
func TestMatchesCgo(t *testing.T) {
	uids := []int{os.Geteuid(), 4000000, 2147483646}
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Skip(err)
	}
	for line := range bytes.Lines(b) {
		f := bytes.Split(line, []byte(":"))
		if len(f) >= 7 {
			if n, err := strconv.Atoi(string(f[2])); err == nil {
				uids = append(uids, n)
			}
		}
	}
	for _, uid := range uids {
		got, err := Lookup(uid)
		u, cerr := user.LookupId(strconv.Itoa(uid))
		var unknown user.UnknownUserIdError
		switch {
		case errors.As(cerr, &unknown):
			if !errors.Is(err, ErrUnknown) {
				t.Errorf("uid %d: got %+v, %v; the C library knows no such user", uid, got, err)
			}
		case cerr != nil:
			t.Logf("uid %d: os/user: %v", uid, cerr)
		case err != nil || got.Name != u.Username || got.Home != u.HomeDir:
			t.Errorf("uid %d: got %+v, %v; the C library gives %s, %s", uid, got, err, u.Username, u.HomeDir)
		}
	}
}
