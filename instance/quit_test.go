package instance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/instance"
)

// TestQuitAfterAnswer: 30 launches race a primary whose ctx is cancelled
// right after it answers a forwarded invocation (the signal.NotifyContext
// pattern: SIGTERM, logout, `app --quit`), and so does every primary after
// it. Every launch must end, exit 0, either answered by a primary (its
// echo) or as a primary itself, and every launch's invocation must run
// exactly once (the last primary is quit by the test's own launch). Before
// the fix, a cancelled primary stopped its bus at once and then held the
// lock through its 5-second drain: callers accepted and done lost their
// answers (ErrAcceptedLost), and the others queued behind one stall after
// another.
func TestQuitAfterAnswer(t *testing.T) {
	const n = 30
	dir := lockDir(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	type launch struct {
		cmd  *exec.Cmd
		out  bytes.Buffer
		err  error
		took time.Duration
		done chan struct{}
	}
	ls := make([]*launch, n)
	start := time.Now()
	for i := range ls {
		l := &launch{}
		l.cmd = exec.Command(os.Args[0], "-test.run=^$")
		l.cmd.Env = append(os.Environ(), roleEnv+"=app", "INST_DIR="+dir, "INST_NAME=quit", "INST_BARRIER=1", "INST_QUIT=1", "INST_ACK=60s")
		l.cmd.ExtraFiles = []*os.File{r}
		l.cmd.Stdout = &l.out
		l.cmd.Stderr = &l.out
		if err := l.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ls[i] = l
	}
	r.Close()
	t.Cleanup(func() {
		for _, l := range ls {
			if l.done == nil {
				l.cmd.Process.Kill()
				l.cmd.Wait()
				continue
			}
			select {
			case <-l.done:
			default:
				l.cmd.Process.Kill()
				<-l.done
			}
		}
	})
	w.Close() // go
	start = time.Now()
	for _, l := range ls {
		l.done = make(chan struct{})
		go func() {
			l.err = l.cmd.Wait()
			l.took = time.Since(start)
			close(l.done)
		}()
	}
	// Each primary quits once it has answered a forwarded invocation, so
	// the last one waits for one more: the test's own, sent once the
	// other 29 have ended. The bound of the whole race: a launch that is
	// neither answered nor made the primary by then hangs. Each primary
	// serves for about a round trip; 30 in a row take well under that.
	bound := time.After(60 * time.Second)
	ended := func() (n int) {
		for _, l := range ls {
			select {
			case <-l.done:
				n++
			default:
			}
		}
		return n
	}
	hung := false
	tick := time.NewTicker(10 * time.Millisecond) // the test's poll of its children, not the library's
	defer tick.Stop()
	for ended() < n-1 && !hung {
		select {
		case <-tick.C:
		case <-bound:
			hung = true
		}
	}
	// The last one may still be starting (the test's launch then becomes
	// the primary and ends, and the last one follows it) or quitting
	// after the 29th's forward: launch again until it has ended.
	for !hung && ended() == n-1 {
		res, err := instance.Run(testCtx(t), "quit", instance.Options{Dir: dir, AckTimeout: 30 * time.Second, Stdout: io.Discard},
			func(ctx context.Context, p *instance.Primary) error { (<-p.Invocations()).Done(0); return nil })
		if err != nil || res.Exit != 0 {
			t.Errorf("the test's launch: %+v, %v", res, err)
			break
		}
		select {
		case <-bound:
			hung = true
		default:
		}
	}
	for _, l := range ls {
		if hung {
			break
		}
		select {
		case <-l.done:
		case <-bound:
			hung = true
		}
	}
	if hung {
		if lk, err := elect.Open(elect.Config{Dir: dir}); err == nil {
			snap, err := lk.Query(testCtx(t), "quit")
			t.Logf("the lock: %+v, %v", snap, err)
			lk.Close()
		}
		for _, l := range ls {
			select {
			case <-l.done:
			default:
				st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", l.cmd.Process.Pid))
				t.Logf("pid %d: %s", l.cmd.Process.Pid, st)
			}
		}
		for _, l := range ls {
			select {
			case <-l.done:
			default:
				t.Errorf("launch pid %d still waits after 60s", l.cmd.Process.Pid)
				l.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, on its stderr
				select {
				case <-l.done:
				case <-time.After(5 * time.Second):
					l.cmd.Process.Kill()
					<-l.done
				}
				t.Logf("its output: %q", l.out.String())
			}
		}
		t.FailNow()
	}
	primaries := 0
	seen := map[string]int{} // deliveries, by invocation ID
	var ids []string         // the launches' own invocations
	for _, l := range ls {
		out := l.out.String()
		if strings.HasPrefix(out, "primary ") {
			primaries++
			own := ""
			for _, line := range strings.Split(out, "\n") {
				if id, ok := strings.CutPrefix(line, "inv "); ok {
					seen[id]++
					if own == "" {
						own = id
					}
				}
			}
			ids = append(ids, own)
			if l.err != nil {
				t.Errorf("primary pid %d: %v: %q", l.cmd.Process.Pid, l.err, out)
			}
			continue
		}
		var e echo
		if l.err != nil || json.Unmarshal(l.out.Bytes(), &e) != nil || e.PID != l.cmd.Process.Pid {
			t.Errorf("launch pid %d: %v, output %q", l.cmd.Process.Pid, l.err, out)
		}
		ids = append(ids, e.ID)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("invocation %s delivered %d times", id, c)
		}
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("a launch's invocation %q was delivered %d times, want once", id, seen[id])
		}
	}
	last := time.Duration(0)
	for _, l := range ls {
		last = max(last, l.took)
	}
	t.Logf("%d launches, %d primaries in turn, all ended within %v", n, primaries, last.Round(time.Millisecond))
}
