package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/supervise"
)

// Waiting in line: the request, what it reports while it waits, and how a
// signal or a lost place ends it.

type signalled struct{ sig os.Signal }

func (s signalled) Error() string { return "got " + s.sig.String() }

// acquire waits for the lock, in line, until -w runs out or a signal comes.
func (o *runOptions) acquire(ctx context.Context, lk *opened, sigs <-chan os.Signal) (*elect.Leadership, error) {
	// ctx's cancellation is deliberately dropped: main's ctx ends on
	// SIGINT and SIGTERM, which this function receives through sigs
	// instead, so that it exits 128+N and reports which signal it was.
	actx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	if o.waitSet {
		var stop context.CancelFunc
		actx, stop = context.WithTimeout(actx, o.wait)
		defer stop()
	}
	var wg sync.WaitGroup
	var got os.Signal
	done := make(chan struct{})
	granted := make(chan struct{}) // closed before done if the lock was
	gotSig := make(chan struct{})
	wg.Go(func() {
		select {
		case got = <-sigs:
			cancel(signalled{got})
			close(gotSig)
		case <-done:
		}
	})
	o.whileWaiting(actx, lk, &wg, done, granted)
	o.early.wait() // the forwarded signals caught before the line is joined (catchEarly)
	lead, err, stuck := o.acquireOrSignal(actx, lk, gotSig)
	for pause := backoffStart; lostPlace(err) && !o.req.IfAvailable && actx.Err() == nil; pause = min(2*pause, time.Second) {
		// A backend whose session can be lost, or that cannot be reached
		// for a while (etcd: a quorum lost, this process stopped past
		// the lease), took our place in line: queue again at its end
		// rather than leave the name to nobody.
		o.logf("lost the place in line for %s (%v); queueing again", o.name, rootCause(err))
		select {
		case <-time.After(pause):
		case <-actx.Done():
		}
		lead, err, stuck = o.acquireOrSignal(actx, lk, gotSig)
	}
	if lostPlace(err) && errors.Is(actx.Err(), context.DeadlineExceeded) {
		err = actx.Err() // -w ran out while queueing again
	}
	endWaiting(&wg, done, granted, err == nil && lead != nil)
	if stuck {
		o.logf("%v while waiting for %s; giving up (the request did not end: its system call is stuck)", got, o.name)
		return nil, silentExit(ExitSignalBase + supervise.SignalNumber(got))
	}
	if got != nil {
		if lead != nil {
			lead.Release()
		}
		o.logf("%v while waiting for %s; giving up", got, o.name)
		return nil, silentExit(ExitSignalBase + supervise.SignalNumber(got))
	}
	return o.acquired(lk, lead, err)
}

// endWaiting closes granted if the lock was, then done, and waits for
// what ran while waiting (whileWaiting).
func endWaiting(wg *sync.WaitGroup, done, granted chan struct{}, ok bool) {
	if ok {
		close(granted)
	}
	close(done)
	wg.Wait()
}

// whileWaiting starts, on wg until done is closed, what runs while this
// instance waits in line: the -v queue report and the --fanout follower.
func (o *runOptions) whileWaiting(ctx context.Context, lk *opened, wg *sync.WaitGroup, done, granted <-chan struct{}) {
	if o.req.IfAvailable {
		return
	}
	if o.verbose || o.notify != nil {
		wg.Go(func() { o.reportQueue(ctx, lk, done) })
	}
	fctx, stop := context.WithCancel(ctx)
	wg.Go(func() {
		<-done
		stop()
	})
	if o.fanout {
		wg.Go(func() { followLeader(ctx, lk.bus(), o.name, o.logf, done, granted) })
	}
	if o.prepared == nil {
		// The term's id, cgroup and, over a lock directory, its
		// watchdog (unless --lazy-watchdog), made while waiting rather
		// than after the grant (supervise.Prepare).
		wg.Go(func() {
			o.prepared = supervise.Prepare(lk.dir, lk.local == nil && !o.lazyWD) // read after acquire's wg.Wait
			t := time.NewTimer(waitingLong)
			defer t.Stop()
			select {
			case <-done: // granted before it waited long: keep both Ps
			case <-t.C:
				oneProcessor()
			}
		})
	}
	// Returns at once unless lk can end a dead holder's term (etcd).
	wg.Go(func() { watchLocalHolder(fctx, lk, o.name) }) // localholder_linux.go
}

// waitingLong is how long a request waits, its term prepared, before
// the rest of the instance runs on one processor (oneProcessor): a request
// granted at once takes about a millisecond, and the change of processors
// stops the world, which cost such a start-up about 0.3 ms of processor
// time (2.4% of its samples under perf) when it came while the grant was
// on its way.
const waitingLong = 5 * time.Millisecond

// oneProcessor runs the rest of this process's Go code on one processor
// (P), unless GOMAXPROCS says otherwise. It is called once an instance is
// waiting in line with its term prepared: from then on its work is one
// path of system calls (the grant, the fence, the fork of COMMAND, the
// release), and a second P only wakes a second thread, which spins,
// whenever a goroutine becomes runnable; on a host whose processors are
// busy (a chain of instances, each hand-off waking two processes and
// ending two) that thread takes a processor from the path. The start-up
// keeps both: there the term's preparation runs beside the request.
// Measured in docs/performance.md.
func oneProcessor() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}

// lostPlace reports whether a request failed without a place in line that
// it could take again: its session was lost, or the service unavailable.
func lostPlace(err error) bool {
	return errors.Is(err, elect.ErrSessionLost) || errors.Is(err, elect.ErrUnavailable)
}

// acquireOrSignal runs the request until it returns, or until stuckAcquire
// after a signal (gotSig) for a request that does not end (stuck).
func (o *runOptions) acquireOrSignal(ctx context.Context, lk *opened, gotSig <-chan struct{}) (lead *elect.Leadership, err error, stuck bool) {
	type acquired struct {
		lead *elect.Leadership
		err  error
	}
	res := make(chan acquired, 1)
	go func() {
		lead, err := lk.Acquire(ctx, o.name, o.req)
		res <- acquired{lead, err}
	}()
	select {
	case a := <-res:
		return a.lead, a.err, false
	case <-gotSig:
	}
	// Acquire returns at once when its ctx ends, unless it is stuck in a
	// system call no context reaches (a FIFO planted in the lock
	// directory, a hung filesystem). Then leaderrun leaves it behind: it
	// holds no lock that its exit would not drop, and has started nothing.
	t := time.NewTimer(stuckAcquire)
	defer t.Stop()
	select {
	case a := <-res:
		return a.lead, a.err, false
	case <-t.C:
		return nil, nil, true
	}
}

// acquired maps the request's outcome to the leadership or the exit.
func (o *runOptions) acquired(lk *opened, lead *elect.Leadership, err error) (*elect.Leadership, error) {
	switch {
	case err == nil:
		return lead, nil
	case errors.Is(err, elect.ErrBusy):
		o.logf("%s is busy: %s; not waiting (-n), exit %d", o.name, o.leaderLine(lk), o.conflict)
		return nil, silentExit(o.conflict)
	case errors.Is(err, context.DeadlineExceeded):
		o.logf("%s is still busy after %s: %s; giving up (-w), exit %d", o.name, o.wait, o.leaderLine(lk), o.conflict)
		return nil, silentExit(o.conflict)
	}
	return nil, o.explain(err)
}

// warnExternal says, for --steal, that a holder which is not leaderrun
// (flock(1) on the lock file) cannot be preempted: --steal then waits for
// it, as any request would.
func (o *runOptions) warnExternal(lk *opened) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	snap, err := lk.Query(ctx, o.name)
	if err != nil {
		return
	}
	for _, h := range snap.Held {
		if h.External {
			fmt.Fprintf(os.Stderr, "leaderrun: cannot steal %s from pid %d, which is not leaderrun (flock(1) or another program on the lock file); waiting until it lets go\n", o.name, h.PID)
			return
		}
	}
}

// leaderLine describes who holds the lock, for messages.
func (o *runOptions) leaderLine(lk *opened) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	snap, err := lk.Query(ctx, o.name)
	if err != nil || len(snap.Held) == 0 {
		return "no holder seen"
	}
	return describeHolder(snap.Held[0])
}

func describeHolder(h elect.Holder) string {
	s := fmt.Sprintf("led by pid %d", h.PID)
	if h.Host != "" {
		s += " on " + h.Host
	}
	if h.External {
		s += " (not leaderrun"
	} else {
		s += fmt.Sprintf(" (epoch %d", h.Epoch)
	}
	s += fmt.Sprintf(", %s", h.Mode)
	if len(h.Command) > 0 {
		s += ": " + strings.Join(h.Command, " ")
	}
	return s + ")"
}

// heldBySelf reports whether this process holds in snap: its request was
// granted while Acquire had not returned yet. Only a holder on this host
// (a backend that names no hosts) can be told by its pid.
func heldBySelf(snap elect.Snapshot) bool {
	for _, h := range snap.Held {
		if h.PID == os.Getpid() && h.Host == "" && !h.External {
			return true
		}
	}
	return false
}

// reportQueue prints, for -v, where this instance stands in line and who
// leads, whenever that changes, and tells systemd (STATUS=, sdnotify.go).
// With -v it polls twice a second: it is only a report for a person
// watching, and waiting does not depend on it (inotify would take one of
// the user's few instances per waiter). Without -v it reports once, as the
// request joins: an idle waiter wakes for nothing, so systemd's status
// line shows the place taken in line, and leading is told at once (run).
func (o *runOptions) reportQueue(ctx context.Context, lk *opened, done <-chan struct{}) {
	last := ""
	t := time.NewTimer(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		snap, err := lk.Query(ctx, o.name)
		if err != nil || heldBySelf(snap) {
			return // granted meanwhile: leading is told next
		}
		msg := fmt.Sprintf("waiting for %s", o.name)
		pos, holder, host := 0, 0, ""
		for i, p := range snap.Pending {
			if p.PID == os.Getpid() {
				msg += fmt.Sprintf(", number %d in line", i+1)
				pos = i + 1
			}
		}
		if len(snap.Held) > 0 {
			msg += ", " + describeHolder(snap.Held[0])
			holder, host = snap.Held[0].PID, snap.Held[0].Host
		}
		o.notify.waiting(o.name, pos, holder, host)
		if msg != last && o.verbose {
			o.logf("%s", msg)
			last = msg
		}
		if !o.verbose {
			return
		}
		t.Reset(500 * time.Millisecond)
	}
}
