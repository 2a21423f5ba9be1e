package elect

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/internal/proctest"
	"github.com/leaderrun/leaderrun/oslock"
	"go.uber.org/goleak"
)

// The contender process of TestChaos (chaos_test.go): it leads, writes the
// fenced log while it leads, and obeys the orchestrator's stdin.

func countFDs() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents) - 1 // the directory being read
}

var errLeave = errors.New("told to leave")
var errTerm = errors.New("SIGTERM")

// chaosContender is the helper process of TestChaos. It queues for the
// name, and while it leads appends to the fenced log every 2ms for a
// random while, then releases and queues again. Stdin: "leave" stops
// taking part (waiting or leading); "abdicate" ends the current term and
// queues again; "finish" means lead once more, then exit. SIGTERM is a
// clean leave. Before exiting cleanly it checks itself for leaked
// goroutines and descriptors.
func chaosContender() int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	out := bufio.NewWriter(os.Stdout)
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
		outMu.Unlock()
	}
	// The runtime's poller keeps its descriptors for life; start it
	// before counting.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	// So does the process's one inotify instance, which holders watch
	// their lock files with.
	before := countFDs()
	if w, err := oslock.WatchPath(os.TempDir()); err == nil {
		w.Stop()
		// The spare instance it probed with is closed in the
		// background.
		for deadline := time.Now().Add(2 * time.Second); countFDs() > before+1 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	fdBase := countFDs()

	ctx, leave := context.WithCancelCause(context.Background())
	abdicate := make(chan struct{}, 1)
	var finishMu sync.Mutex
	finish := false
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			switch sc.Text() {
			case "leave":
				leave(errLeave)
			case "abdicate":
				select {
				case abdicate <- struct{}{}:
				default:
				}
			case "finish":
				finishMu.Lock()
				finish = true
				finishMu.Unlock()
			}
		}
		leave(errLeave) // the test is gone
	}()
	go func() {
		if _, ok := <-sigs; ok {
			leave(errTerm)
		}
	}()
	ignore := goleak.IgnoreCurrent()

	code := chaosRun(ctx, say, abdicate, func() bool { finishMu.Lock(); defer finishMu.Unlock(); return finish })
	if code != 0 {
		return code
	}
	signal.Stop(sigs)
	close(sigs)
	if err := goleak.Find(ignore, goleak.IgnoreTopFunction("os/signal.signal_recv"), goleak.IgnoreTopFunction("os/signal.loop")); err != nil {
		say("leaks goroutines: %s", strings.ReplaceAll(err.Error(), "\n", " | "))
		return 0
	}
	deadline := time.Now().Add(2 * time.Second)
	for countFDs() != fdBase && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := countFDs(); n != fdBase {
		ents, _ := os.ReadDir("/proc/self/fd")
		var links []string
		for _, e := range ents {
			l, _ := os.Readlink("/proc/self/fd/" + e.Name())
			links = append(links, e.Name()+"->"+l)
		}
		say("leaks fds: %d open, %d at start: %s", n, fdBase, strings.Join(links, " "))
		return 0
	}
	say("leaks ok")
	return 0
}

func chaosRun(ctx context.Context, say func(string, ...any), abdicate chan struct{}, finishing func() bool) int {
	env := os.Getenv
	name := env("T_NAME")
	l, err := Open(Config{Dir: env("T_DIR")})
	if err != nil {
		say("error open: %v", err)
		return 2
	}
	defer l.Close()
	res, err := proctest.OpenFencedLog(env("T_RES"))
	if err != nil {
		say("error resource: %v", err)
		return 2
	}
	defer res.Close()
	req := Request{Steal: env("T_STEAL") != ""}
	if d, err := time.ParseDuration(env("T_KILLAFTER")); err == nil {
		req.KillAfter = d
	}
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))
	for {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if d, err := time.ParseDuration(env("T_STEALFOR")); err == nil && req.Steal {
			actx, cancel = context.WithTimeout(ctx, d)
		}
		lead, err := chaosAcquire(actx, l, name, req, say)
		cancel()
		if err != nil && ctx.Err() == nil && req.Steal && actx.Err() != nil {
			say("abandoned %v", errors.Is(err, ErrStealAbandoned))
			req.Steal, req.KillAfter = false, 0 // go on as an ordinary contender
			continue
		}
		if err != nil {
			if c := context.Cause(ctx); c != nil {
				if c == errTerm {
					say("term")
				} else {
					say("left")
				}
				return 0
			}
			say("error acquire: %v", err)
			return 2
		}
		req.Steal, req.KillAfter = false, 0 // a stealer steals once
		seq := ownTicket(l, name, lead.Epoch())
		say("leader %d %d %d", lead.Epoch(), seq, lead.Since().UnixNano())
		wasFinishing := finishing()
		ok, err := res.Append("S", lead.Epoch(), strconv.FormatUint(seq, 10))
		if err == nil && ok {
			hold := time.NewTimer(time.Duration(1+rng.IntN(40)) * time.Millisecond)
			tick := time.NewTicker(2 * time.Millisecond)
		lead:
			for {
				select {
				case <-lead.Done():
					break lead // stolen: stop writing, as a real leader would
				case <-ctx.Done():
					break lead
				case <-abdicate:
					break lead
				case <-hold.C:
					ok, err = res.Append("E", lead.Epoch(), strconv.FormatUint(seq, 10))
					break lead
				case <-tick.C:
					if ok, err = res.Append("T", lead.Epoch(), strconv.FormatUint(seq, 10)); err != nil || !ok {
						break lead
					}
				}
			}
			hold.Stop()
			tick.Stop()
		}
		if err != nil {
			say("error fenced log: %v", err)
			lead.Release()
			return 2
		}
		if !ok {
			say("refused epoch %d", lead.Epoch())
			lead.Release()
			return 2
		}
		lead.Release()
		say("released")
		if context.Cause(ctx) != nil {
			if context.Cause(ctx) == errTerm {
				say("term")
			} else {
				say("left")
			}
			return 0
		}
		if wasFinishing {
			say("done")
			return 0
		}
	}
}

// chaosAcquire is Acquire plus a report of the ticket once it shows in
// the queue ("queued SEQ UNIXNANO"), so that the orchestrator can check
// grant order against join order.
func chaosAcquire(ctx context.Context, l *Locker, name string, req Request, say func(string, ...any)) (*Leadership, error) {
	actx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for actx.Err() == nil {
			if seq, ok := findTicket(l, name, func(r record) bool { return r.Epoch == 0 }); ok {
				if actx.Err() == nil {
					say("queued %d %d", seq, time.Now().UnixNano())
				}
				return
			}
			select {
			case <-actx.Done():
			case <-time.After(time.Millisecond):
			}
		}
	}()
	lead, err := l.Acquire(ctx, name, req)
	stop()
	wg.Wait()
	return lead, err
}

// ownTicket returns the number of this process's granted ticket
// (stealBit set for a steal ticket), or 0 if it cannot be found.
func ownTicket(l *Locker, name string, epoch uint64) uint64 {
	seq, _ := findTicket(l, name, func(r record) bool { return r.Epoch == epoch })
	return seq
}

func findTicket(l *Locker, name string, match func(record) bool) (uint64, bool) {
	q, err := l.dir.Sub(name+queueSuffix, false, defaultSubOpts)
	if err != nil {
		return 0, false
	}
	defer q.Close()
	queue, err := listQueue(q)
	if err != nil {
		return 0, false
	}
	for _, e := range queue {
		if r, err := readRecord(q, e.name); err == nil && r.PID == os.Getpid() && match(r) {
			if e.steal {
				return e.seq | stealBit, true
			}
			return e.seq, true
		}
	}
	return 0, false
}
