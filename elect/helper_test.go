package elect

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/proctest"
	"github.com/leaderrun/leaderrun/oslock"
)

// The test binary doubles as every helper process of elect's tests:
// TestMain runs the role that proctest.RoleEnv names instead of the tests.
func TestMain(m *testing.M) {
	proctest.Main(map[string]func() int{
		"contender":   contender,
		"chaos":       chaosContender,
		"hostile":     hostileRole,
		"defaultdir":  defaultDirRole,
		"groupshared": groupSharedRole,
		"bench":       benchRole,
		"elector":     electorRole,
	})
	os.Exit(m.Run())
}

// contender asks for a lock as its environment says, prints "leader
// EPOCH" when granted, and then obeys stdin: "release" releases and exits.
// On losing leadership it prints "lost CAUSE" and, unless told to hold on,
// releases. Stdin closing (the test died) ends it.
func contender() int {
	env := os.Getenv
	l, err := Open(Config{Dir: env("T_DIR")})
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if d, err := time.ParseDuration(env("T_TIMEOUT")); err == nil {
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	lead, err := l.Acquire(ctx, env("T_NAME"), contenderRequest())
	switch {
	case errors.Is(err, ErrBusy):
		fmt.Println("busy")
		return 3
	case errors.Is(err, ErrStealAbandoned):
		fmt.Println("abandoned", err)
		return 5
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Println("timeout")
		return 4
	case err != nil:
		fmt.Println("error", err)
		return 2
	}
	fmt.Println("leader", lead.Epoch())
	return holdTerm(lead, func() int {
		if env("T_HOLD") == "" {
			lead.Release()
			fmt.Println("released")
			return 0
		}
		<-make(chan struct{}) // keep the kernel lock until killed
		return 0
	})
}

// contenderRequest is the Request that the T_* settings describe.
func contenderRequest() Request {
	env := os.Getenv
	req := Request{IfAvailable: env("T_TRY") != "", Steal: env("T_STEAL") != ""}
	if env("T_MODE") == "shared" {
		req.Mode = Shared
	}
	if d, err := time.ParseDuration(env("T_KILLAFTER")); err == nil {
		req.KillAfter = d
	}
	if d, err := time.ParseDuration(env("T_STEALSTOPPED")); err == nil {
		req.StealStopped = d
	}
	return req
}

// holdTerm is a helper process's term: it keeps lead until stdin says
// "release" or ends (the test is gone), then releases and prints
// "released"; if the term ends first, it prints "lost CAUSE" and returns
// what lost does.
func holdTerm(lead *Leadership, lost func() int) int {
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	for {
		select {
		case <-lead.Done():
			fmt.Println("lost", lead.Err())
			return lost()
		case line, ok := <-lines:
			if !ok || line == "release" {
				lead.Release()
				fmt.Println("released")
				return 0
			}
		}
	}
}

// spawn starts a contender for name in dir; extra are T_* settings.
func spawn(t *testing.T, dir, name string, extra ...string) *proctest.Proc {
	t.Helper()
	return proctest.StartRole(t, "contender", "contender", append([]string{"T_DIR=" + dir, "T_NAME=" + name}, extra...)...)
}

// testLocker opens a Locker on a fresh private directory.
// testDir opens a lock directory of the test's own, closed at its end.
func testDir(t *testing.T) *oslock.Dir {
	t.Helper()
	d, err := oslock.OpenDir(t.TempDir(), oslock.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func testLocker(t *testing.T) (*Locker, string) {
	t.Helper()
	dir := t.TempDir()
	return openLocker(t, dir), dir
}

// openLocker opens a Locker on dir, closed when the test ends.
func openLocker(t *testing.T, dir string) *Locker {
	t.Helper()
	l, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// pending returns the queued pids of name in order.
func pending(t *testing.T, l *Locker, name string) []int {
	t.Helper()
	_, queued := queryPIDs(t, l, name)
	return queued
}

// holders returns the pids that hold name.
func holders(t *testing.T, l *Locker, name string) []int {
	t.Helper()
	held, _ := queryPIDs(t, l, name)
	return held
}

func queryPIDs(t *testing.T, l *Locker, name string) (held, queued []int) {
	t.Helper()
	s, err := l.Query(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range s.Held {
		held = append(held, h.PID)
	}
	for _, p := range s.Pending {
		queued = append(queued, p.PID)
	}
	return held, queued
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var defaultSubOpts = oslock.DirOptions{}
