// Package proctest is the harness of leaderrun's multi-process tests: the
// test binary re-executes itself as contenders, leaders and members, and
// the test talks to each through lines on its stdin and stdout.
//
// It guarantees that every process a test starts is ended and reaped by
// the test's cleanup (continued if stopped, then killed, with its process
// group if it leads one), that the test fails if one cannot be reaped,
// that no wait lasts longer than its bound, and that only processes the
// test started are ever signalled (never a pid below 2, a group only while
// its leader is unreaped). A process is reaped as soon as it exits, even
// if a grandchild keeps its output open. It also gives the tests one
// Eventually, one fenced log (fencedlog.go) and, for tests run as root,
// throwaway users and groups that concurrent test runs do not share
// (users.go). It uses the standard library and x/sys only, so that any
// package's in-package tests can import it.
//
// A package's TestMain hands its roles to [Main]:
//
//	func TestMain(m *testing.M) {
//		proctest.Main(map[string]func() int{"contender": contender})
//		os.Exit(m.Run())
//	}
//
// # Platform notes
//
// It builds on unix only (it runs processes as other users and signals
// process groups), and the fenced log where flock(2) exists.
package proctest
