//go:build darwin || !unix

package userdb

import (
	"errors"
	"os/user"
)

func lookup(uid int) (User, error) {
	u, err := user.LookupId(uidKey(uid))
	var unknown user.UnknownUserIdError
	if errors.As(err, &unknown) {
		return User{}, ErrUnknown
	}
	if err != nil {
		return User{}, err
	}
	return User{Name: u.Username, Home: u.HomeDir}, nil
}
