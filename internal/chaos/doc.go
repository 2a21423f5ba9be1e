// Package chaos is the driver the command line's chaos soaks share
// (tests/clichaos for the flock backend, etcd/tests/chaos, pg/tests/chaos):
// what does not depend on the backend. It holds the test binary's set-up
// ([Main]: the link through which it plays the leaderrun command, and the
// roles it plays under it), the COMMAND role ([Command]), which trusts
// nothing leaderrun says and proves by a flock(2) of its own that it runs
// alone, the log it writes ([Line], over [proctest.FencedLog]) and the
// checks of that log ([Check]: no two COMMANDs at once, no refused fenced
// write, epochs growing, one wrapper per term). Each suite keeps its
// backend plug: how it starts a wrapper, its faults, which exits it
// expects, its figures. It builds where [proctest.FencedLog] does (the
// flock(2) platforms); the running-lock diagnostics read /proc/locks.
package chaos
