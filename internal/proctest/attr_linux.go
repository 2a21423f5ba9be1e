package proctest

import "syscall"

// ServerAttr is how a test starts a server it runs for its tests
// (PostgreSQL, etcd): as cred (nil: as itself), in a process group of its
// own, and killed with SIGKILL should the test process die before its
// cleanup (Pdeathsig: a test binary killed by its timeout leaves no
// server behind).
func ServerAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
