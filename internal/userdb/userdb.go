// Package userdb looks a uid up in the user database, giving the answer
// the C library's getpwuid(3) gives, without linking cgo (os/user's cgo
// half costs every start of the binary its dynamic loading, issue 24).
//
// On Linux and the BSDs it reads /etc/passwd, and asks the C library's
// name service switch through getent(1) only where the files alone may
// not give getpwuid's answer: when nsswitch.conf's passwd line does not
// start with "files" (sss, ldap or compat first), or when it names more
// sources than files and the uid is not in /etc/passwd (a user known only
// through LDAP, SSSD, winbind or systemd). A user of the files is so found
// with no process started; any other is found as a cgo build finds it. On
// darwin and where there is no unix, os/user is used, which calls the
// system's library there without cgo.
package userdb

import (
	"errors"
	"strconv"
)

// User is one entry of the user database.
type User struct {
	Name string // login name
	Home string // home directory, as the database says
}

// ErrUnknown: the user database has no entry for the uid.
var ErrUnknown = errors.New("userdb: no such user")

// Lookup returns uid's entry in the user database: ErrUnknown if it has
// none, another error if the database could not be asked.
func Lookup(uid int) (User, error) {
	if uid < 0 {
		return User{}, ErrUnknown
	}
	return lookup(uid)
}

func uidKey(uid int) string { return strconv.Itoa(uid) }
