//go:build unix && !linux

package proctest

import "syscall"

// ServerAttr is how a test starts a server it runs for its tests
// (PostgreSQL, etcd): as cred (nil: as itself), in a process group of its
// own. There is no Pdeathsig here: the server of a test binary killed
// before its cleanup (a timeout) runs on until it is stopped by hand.
func ServerAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true}
}
