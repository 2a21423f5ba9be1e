//go:build unix && !linux

package pgtest

import "syscall"

// serverAttr runs the postmaster as cred, in a process group of its own.
// There is no Pdeathsig here: the server of a test binary killed before
// its cleanup (a timeout) runs on until it is stopped by hand (pg_ctl
// stop -D, its directory is in the test's log).
func serverAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true}
}
