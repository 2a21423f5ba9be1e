package instance_test

import (
	"context"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leaderrun/leaderrun/instance"
)

// ignoreSentinel are the options the package doc gives to a goleak test.
var ignoreSentinel = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/leaderrun/leaderrun/oslock.readSentinel"),
	goleak.IgnoreAnyFunction("github.com/leaderrun/leaderrun/oslock.readMounts"),
}

// fds lists the process's descriptors and what they are.
func fds() map[string]string {
	m := map[string]string{}
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil {
			m[e.Name()] = l
		}
	}
	return m
}

// watchingMounts reports whether the process watches its mount table, as
// a holder's path watch makes it do.
func watchingMounts() bool {
	for _, what := range fds() {
		if strings.HasSuffix(what, "/mountinfo") {
			return true
		}
	}
	return false
}

// leakApp, in a fresh process, is a primary and a forwarding launch of
// it, both ended; it then prints what goleak finds with the documented
// option, and the descriptors the process has gained.
func leakApp() int {
	dir := os.Getenv("INST_DIR")
	before := fds()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	started := make(chan struct{})
	ended := make(chan error, 1)
	go func() {
		_, err := instance.Run(pctx, "leak", instance.Options{Dir: dir, Args: [][]byte{}, Stdout: io.Discard}, func(ctx context.Context, p *instance.Primary) error {
			for {
				select {
				case inv := <-p.Invocations():
					if inv.Local {
						// Once the path watch is armed (PathWatchDelay
						// into the term): then the process has all that
						// the doc says it may keep.
						for deadline := time.Now().Add(10 * time.Second); !watchingMounts() && time.Now().Before(deadline); {
							time.Sleep(time.Millisecond)
						}
						close(started)
					}
					inv.Done(0)
				case <-ctx.Done():
					return nil
				}
			}
		})
		ended <- err
	}()
	<-started
	res, err := instance.Run(ctx, "leak", instance.Options{Dir: dir, Args: [][]byte{[]byte("x")}, Stdout: io.Discard}, func(context.Context, *instance.Primary) error {
		return fmt.Errorf("the forwarding launch became the primary")
	})
	if err != nil || res.Primary {
		fmt.Println("forward:", res, err)
		return 1
	}
	stop()
	if err := <-ended; err != nil {
		fmt.Println("primary:", err)
		return 1
	}
	if err := goleak.Find(ignoreSentinel...); err != nil {
		fmt.Println("goleak:", strings.ReplaceAll(err.Error(), "\n", " | "))
	} else {
		fmt.Println("goleak: none")
	}
	if err := goleak.Find(); err == nil || !strings.Contains(err.Error(), "oslock.readSentinel") || !strings.Contains(err.Error(), "oslock.readMounts") {
		fmt.Printf("goleak without the option: %v\n", err)
	} else {
		fmt.Println("goleak without the option: oslock.readSentinel oslock.readMounts")
	}
	var gained []string
	for fd, what := range fds() {
		if before[fd] != what {
			if strings.HasSuffix(what, "/mountinfo") {
				what = "/proc/PID/mountinfo"
			}
			gained = append(gained, what)
		}
	}
	slices.Sort(gained)
	fmt.Printf("gained: %q\n", gained)
	return 0
}

// TestLeftBehind checks what the package doc says a leak test will see
// after Run has returned, as the primary (whose term lasted past
// elect.PathWatchDelay) and as a forwarding launch: the goroutines oslock.readSentinel and oslock.readMounts, which
// goleak.IgnoreAnyFunction of them ignores, and two descriptors of its own,
// the process's inotify instance and its mount table watch, beside the Go
// runtime's poller (checked in a fresh process, where no
// earlier test made them).
func TestLeftBehind(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"=leak", "INST_DIR="+lockDir(t))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := string(out)
	t.Log(got)
	if !strings.Contains(got, "goleak: none\n") {
		t.Errorf("goroutines left besides oslock.readSentinel and oslock.readMounts: %s", got)
	}
	if !strings.Contains(got, "goleak without the option: oslock.readSentinel oslock.readMounts\n") {
		t.Errorf("the goroutine the doc names is not what goleak sees: %s", got)
	}
	// Besides the instance, the Go runtime's netpoller (made by the first
	// pipe or socket of any program).
	if !strings.Contains(got, `gained: ["/proc/PID/mountinfo" "anon_inode:[eventfd]" "anon_inode:[eventpoll]" "anon_inode:inotify"]`) {
		t.Errorf("descriptors left, want the inotify instance and the runtime's poller only: %s", got)
	}
}

// TestDocClaims: the package doc says what TestLeftBehind and the
// activation-token testscript check, and no longer what was wrong (the
// directory "under $XDG_RUNTIME_DIR, one per user and login").
func TestDocClaims(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	text := f.Doc.Text()
	for _, want := range []string{
		"elect.DefaultDir()",
		`goleak.IgnoreAnyFunction("github.com/leaderrun/leaderrun/oslock.readSentinel")`,
		"anon_inode:inotify",
		`Options.Env = []string{"XDG_ACTIVATION_TOKEN", "DESKTOP_STARTUP_ID"}`,
		"--forward-env XDG_ACTIVATION_TOKEN,DESKTOP_STARTUP_ID",
	} {
		if !strings.Contains(strings.Join(strings.Fields(text), " "), want) {
			t.Errorf("the package doc does not say %s", want)
		}
	}
	for _, wrong := range []string{"under $XDG_RUNTIME_DIR", "one per user and login"} {
		if strings.Contains(strings.Join(strings.Fields(text), " "), wrong) {
			t.Errorf("the package doc still says %q", wrong)
		}
	}
}
