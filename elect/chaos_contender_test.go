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

	"go.uber.org/goleak"

	"github.com/leaderrun/leaderrun/internal/proctest"
	"github.com/leaderrun/leaderrun/oslock"
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
	fdBase := fdBaseline()
	ctx, leave := context.WithCancelCause(context.Background())
	o := readOrders(leave)
	go func() {
		if _, ok := <-sigs; ok {
			leave(errTerm)
		}
	}()
	ignore := goleak.IgnoreCurrent()

	code := chaosRun(ctx, say, o.abdicate, o.finishing)
	if code != 0 {
		return code
	}
	signal.Stop(sigs)
	close(sigs)
	say("%s", leakCheck(ignore, fdBase))
	return 0
}

// fdBaseline returns how many descriptors the process has once those it
// keeps for life are open: the runtime's poller and the process's one
// inotify instance, which holders watch their lock files with.
func fdBaseline() int {
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	// The process's one watch of the mount table, which holders use too.
	if _, stop, err := oslock.WatchMounts(); err == nil {
		stop()
	}
	before := countFDs()
	if w, err := oslock.WatchPath(os.TempDir()); err == nil {
		w.Stop()
		// The spare instance it probed with is closed in the
		// background.
		for deadline := time.Now().Add(2 * time.Second); countFDs() > before+1 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	return countFDs()
}

// orders are what the orchestrator said on stdin.
type orders struct {
	abdicate chan struct{}
	mu       sync.Mutex
	finish   bool
}

func (o *orders) finishing() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.finish
}

// readOrders reads stdin until it ends (the test is gone), which is a
// leave as "leave" is.
func readOrders(leave context.CancelCauseFunc) *orders {
	o := &orders{abdicate: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			switch sc.Text() {
			case "leave":
				leave(errLeave)
			case "abdicate":
				select {
				case o.abdicate <- struct{}{}:
				default:
				}
			case "finish":
				o.mu.Lock()
				o.finish = true
				o.mu.Unlock()
			}
		}
		leave(errLeave)
	}()
	return o
}

// leakCheck returns "leaks ok", or what leaked: goroutines beside those
// of ignore and the signal handler, or descriptors beyond fdBase (given
// 2s to close).
func leakCheck(ignore goleak.Option, fdBase int) string {
	if err := goleak.Find(ignore, goleak.IgnoreTopFunction("os/signal.signal_recv"), goleak.IgnoreTopFunction("os/signal.loop")); err != nil {
		return "leaks goroutines: " + strings.ReplaceAll(err.Error(), "\n", " | ")
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
		return fmt.Sprintf("leaks fds: %d open, %d at start: %s", n, fdBase, strings.Join(links, " "))
	}
	return "leaks ok"
}

// chaosRun takes part until told to leave or finish: it returns 0 after
// a clean leave ("left", or "term" on SIGTERM) or finish ("done"), 2 on
// an error.
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
			if context.Cause(ctx) != nil {
				sayLeft(ctx, say)
				return 0
			}
			say("error acquire: %v", err)
			return 2
		}
		req.Steal, req.KillAfter = false, 0 // a stealer steals once
		seq := ownTicket(l, name, lead.Epoch())
		say("leader %d %d %d", lead.Epoch(), seq, lead.Since().UnixNano())
		wasFinishing := finishing()
		if code := chaosTerm(ctx, lead, seq, res, rng, abdicate, say); code != 0 {
			return code
		}
		if context.Cause(ctx) != nil {
			sayLeft(ctx, say)
			return 0
		}
		if wasFinishing {
			say("done")
			return 0
		}
	}
}

// sayLeft says why the contender stopped taking part: "term" (SIGTERM)
// or "left".
func sayLeft(ctx context.Context, say func(string, ...any)) {
	if context.Cause(ctx) == errTerm {
		say("term")
	} else {
		say("left")
	}
}

// chaosTerm is one term: it appends a start record to the fenced log,
// a tick every 2ms, and an end record after a random hold of 1-40ms,
// stopping early when the term ends (stolen: a real leader stops writing),
// the contender leaves or is told to abdicate; then it releases. It
// returns 2 if a write failed or was fenced off.
func chaosTerm(ctx context.Context, lead *Leadership, seq uint64, res *proctest.FencedLog, rng *rand.Rand, abdicate chan struct{}, say func(string, ...any)) int {
	ticket := strconv.FormatUint(seq, 10)
	ok, err := res.Append("S", lead.Epoch(), ticket)
	if err == nil && ok {
		hold := time.NewTimer(time.Duration(1+rng.IntN(40)) * time.Millisecond)
		tick := time.NewTicker(2 * time.Millisecond)
	lead:
		for {
			select {
			case <-lead.Done():
				break lead
			case <-ctx.Done():
				break lead
			case <-abdicate:
				break lead
			case <-hold.C:
				ok, err = res.Append("E", lead.Epoch(), ticket)
				break lead
			case <-tick.C:
				if ok, err = res.Append("T", lead.Epoch(), ticket); err != nil || !ok {
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
	return 0
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
