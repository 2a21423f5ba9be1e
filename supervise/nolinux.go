//go:build !linux

package supervise

import (
	"context"
	"os/exec"
	"time"

	"github.com/leaderrun/leaderrun/oslock"
)

// What Linux alone has: the fence needs /proc, pidfds and cgroups, the
// watchdog Pdeathsig and /proc, the terminal's hand-over its job control
// as Linux reports it. Elsewhere no term is marked, a COMMAND whose
// supervisor was killed with SIGKILL is not stopped by the next leader,
// and COMMAND runs in a background process group without the terminal.
const fenceSupported = false

func fenceTerm(context.Context, *termRecord) bool { return true }
func wrapperAlive(*termRecord) bool               { return false }
func procStart(int) (uint64, bool)                { return 0, false }
func selfStart() uint64                           { return 0 }

const selfPidNS = 0

func lockHolders(*oslock.Dir, string) map[int]bool { return nil }

type termCgroup struct{ path string }

func newTermCgroup(string) *termCgroup                { return nil }
func newTermCgroupIn(string, string) *termCgroup      { return nil }
func ownCgroup() string                               { return "" }
func cgroupPopulated(string) (populated, ok bool)     { return false, false }
func cgroupProcs(string) (pids []int, ok bool)        { return nil, false }
func sweepCgroups(string)                             {}
func warmSpawn()                                      {}
func (c *termCgroup) prepare(*exec.Cmd)               {}
func (c *termCgroup) remove(ctx context.Context) bool { return true }

type watchdog struct{}

func startWatchdog(*Term) *watchdog                    { return nil }
func prepareWatchdog() *watchdog                       { return nil }
func (wd *watchdog) begin(*Term) bool                  { return false }
func (wd *watchdog) command(*termRecord)               {}
func (wd *watchdog) deadline(time.Time, time.Duration) {}
func (wd *watchdog) say(string)                        {}
func (wd *watchdog) close()                            {}

func runWatchdogRole(TermEnd) (code int, ok bool) { return 0, false }

func outliveHolder(context.Context, string, string, int, func(context.Context) error) {}

func pidsLimit() error { return nil }

func foregroundTTY() (int, bool) { return -1, false }
func restoreForeground(int)      {}
func watchStops(*Command)        {}

func (c *Command) suspend() {}

func watchHangup() <-chan struct{} { return nil }
