//go:build linux

// Command gofloor is the least a Go program can do for `leaderrun --name x
// -- COMMAND`: take an exclusive flock(2) on FILE, run COMMAND with
// os/exec, wait, and exit with its code. It does nothing else (no queue, no
// fence, no term, no flags), so its start-up is the floor that any
// leaderrun written in Go pays on the machine at hand: the runtime's own
// start (page faults, threads, the cgroup read for GOMAXPROCS) and one
// os/exec spawn. bench/report times it beside leaderrun and flock(1).
//
//	gofloor FILE COMMAND [ARG...]
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: gofloor FILE COMMAND [ARG...]")
		os.Exit(64)
	}
	f, err := os.OpenFile(os.Args[1], os.O_RDWR|os.O_CREATE, 0o600)
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gofloor:", err)
		os.Exit(71)
	}
	c := exec.Command(os.Args[2], os.Args[3:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = c.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		os.Exit(ee.ExitCode())
	case err != nil:
		fmt.Fprintln(os.Stderr, "gofloor:", err)
		os.Exit(127)
	}
}
