//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cpuAcct counts the processor time of this process and everything it
// starts, in a cgroup v1 cpuacct group of its own, where the hierarchy is
// mounted and writable (a root shell on a hybrid host); elsewhere ok is
// false and now is 0.
type cpuAcct struct{ root, group string }

const cpuacctRoot = "/sys/fs/cgroup/cpuacct"

// enterCPUAccounting moves this process into a new cpuacct group.
func enterCPUAccounting() *cpuAcct {
	g := filepath.Join(cpuacctRoot, "leaderrun-report-"+strconv.Itoa(os.Getpid()))
	if os.Mkdir(g, 0o755) != nil {
		return &cpuAcct{}
	}
	if os.WriteFile(filepath.Join(g, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0) != nil {
		os.Remove(g)
		return &cpuAcct{}
	}
	return &cpuAcct{root: cpuacctRoot, group: g}
}

func (c *cpuAcct) ok() bool { return c.group != "" }

// now is the group's processor time so far, in ns.
func (c *cpuAcct) now() float64 {
	if !c.ok() {
		return 0
	}
	b, _ := os.ReadFile(filepath.Join(c.group, "cpuacct.usage"))
	v, _ := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	return v
}

// leave moves this process back to the hierarchy's root and removes the
// group (empty once its children are gone).
func (c *cpuAcct) leave() {
	if c.ok() {
		os.WriteFile(filepath.Join(c.root, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
		os.Remove(c.group)
	}
}
