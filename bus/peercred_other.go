//go:build !linux && !darwin && !freebsd

package bus

import "errors"

func sockPeerCred(fd uintptr) (uid, pid int, err error) {
	return -1, 0, errors.ErrUnsupported
}
