package pgtest

import "syscall"

// serverAttr runs the postmaster as cred, in a process group of its own,
// and kills it should the test process die (Pdeathsig), so that no
// server outlives a test binary killed by its timeout.
func serverAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
