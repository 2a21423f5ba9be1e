//go:build unix

package proctest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Leftover is a living process found by WithEnv.
type Leftover struct {
	PID     int
	State   string // proc(5) /proc/PID/stat's state: R, S, D, T (stopped)...
	Cmdline string
	env     [][]byte
}

// Getenv is the value of key in the process's environment, "" if unset.
func (p Leftover) Getenv(key string) string {
	for _, kv := range p.env {
		if k, v, ok := bytes.Cut(kv, []byte("=")); ok && string(k) == key {
			return string(v)
		}
	}
	return ""
}

// WithEnv lists the living processes, this one aside, whose environment
// holds kv ("KEY=VALUE"): whatever a test's processes left running (a
// COMMAND, its grandchildren, a watchdog), wherever their parents went.
// Gone means reaped or a zombie, never kill(pid, 0). It reads /proc:
// outside Linux it finds nothing.
func WithEnv(kv string) []Leftover {
	want := []byte(kv)
	ents, _ := os.ReadDir("/proc")
	var out []Leftover
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid < 2 || pid == os.Getpid() {
			continue
		}
		st := procState(pid)
		if st == "" || st == "Z" || st == "X" {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		p := Leftover{PID: pid, State: st, env: bytes.Split(env, []byte{0})}
		if !containsKV(p.env, want) {
			continue
		}
		cl, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		p.Cmdline = string(bytes.ReplaceAll(bytes.TrimRight(cl, "\x00"), []byte{0}, []byte{' '}))
		out = append(out, p)
	}
	return out
}

func containsKV(env [][]byte, kv []byte) bool {
	for _, e := range env {
		if bytes.Equal(e, kv) {
			return true
		}
	}
	return false
}

// Describe lists ps for a failure message, each with what label says of
// it (its role, say; nil for its state).
func Describe(ps []Leftover, label func(Leftover) string) string {
	var s []string
	for _, p := range ps {
		l := p.State
		if label != nil {
			l = label(p)
		}
		s = append(s, fmt.Sprintf("pid %d (%s: %s)", p.PID, l, p.Cmdline))
	}
	return strings.Join(s, ", ")
}

// procState is pid's state letter in /proc/PID/stat, "" when it is gone.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return ""
	}
	return string(b[i+2])
}
