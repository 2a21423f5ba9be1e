package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/supervise"
	"github.com/urfave/cli/v3"
)

// Back-off between restarts: doubled after each run, back to the start
// after a run that lasted resetAfter.
const (
	backoffStart = 100 * time.Millisecond
	backoffMax   = 30 * time.Second
	resetAfter   = 10 * time.Second
)

// stuckAcquire is how long a request told to stop by a signal may take to
// end before leaderrun exits without it.
const stuckAcquire = 2 * time.Second

// runOptions is the validated command line of the default action.
type runOptions struct {
	argv     []string
	name     string
	dir      string // --dir, LEADERRUN_DIR, or "" for the default
	open     func() (*opened, error)
	req      elect.Request
	wait     time.Duration
	waitSet  bool
	conflict int
	// commandStarted: COMMAND ran in the current term (see term).
	commandStarted bool
	grace          time.Duration
	graceSet       bool // --grace was given
	restart        string
	fanout         bool
	verbose        bool
	// exclusive: -x/-e was given; the mode is exclusive anyway unless
	// -s, which contradicts it.
	exclusive bool
	ready     string    // --notify-ready
	notify    *notifier // NOTIFY_SOCKET (sdnotify.go), or nil
}

func runAction(ctx context.Context, c *cli.Command) error {
	if c.Bool("single-instance") {
		return singleAction(ctx, c) // single.go
	}
	o, err := runOptionsFrom(c)
	if err != nil {
		return err
	}
	return o.run(ctx)
}

// runOptionsFrom reads and checks the command line of the default action.
func runOptionsFrom(c *cli.Command) (*runOptions, error) {
	argv := c.Args().Slice()
	dashed := len(argv) > 0 && argv[0] == "--" // see protectDashDash
	if dashed {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return nil, usageErrorf("leaderrun: no COMMAND given; write leaderrun [flags] -- COMMAND [ARG...], or see leaderrun --help")
	}
	if !dashed && len(argv[0]) > 1 && argv[0][0] == '-' {
		// urfave/cli v3 takes a dash and a digit (-5) for an argument;
		// before --, it is a flag leaderrun does not know.
		return nil, usageErrorf("leaderrun: flag provided but not defined: %s; see leaderrun --help", argv[0])
	}
	if !dashed && argv[0] == "version" {
		return nil, usageErrorf("leaderrun: version is not a subcommand; for leaderrun's version write leaderrun --version, to run a program named version write leaderrun -- version")
	}
	if c.IsSet("name") && c.String("name") == "" {
		return nil, usageErrorf("leaderrun: --name is empty; give a NAME such as --name backup, or leave --name out to derive one from COMMAND")
	}
	o := readRunFlags(c, argv)
	if err := o.check(); err != nil {
		return nil, err
	}
	if err := elect.ValidateName(o.name); err != nil {
		return nil, usageErrorf("leaderrun: --name: %v", err)
	}
	if err := checkCommand(argv[0], dashed); err != nil {
		return nil, err
	}
	return o, nil
}

// readRunFlags copies the default action's flags into runOptions.
func readRunFlags(c *cli.Command, argv []string) *runOptions {
	o := &runOptions{
		argv:     argv,
		name:     c.String("name"),
		dir:      lockDir(c),
		open:     func() (*opened, error) { return openLocker(c) },
		conflict: c.Int("conflict-exit-code"),
		restart:  c.String("restart"),
		fanout:   c.Bool("fanout"),
		verbose:  c.Bool("verbose"),
		req:      elect.Request{IfAvailable: c.Bool("nonblock"), Steal: c.Bool("steal"), Command: argv},
	}
	o.wait, o.waitSet = durationFlag(c, "wait")
	o.grace, _ = durationFlag(c, "grace")
	o.graceSet = c.IsSet("grace")
	o.req.StealStopped, _ = durationFlag(c, "steal-stopped")
	if c.Bool("shared") {
		o.req.Mode = elect.Shared
	}
	o.exclusive = c.Bool("exclusive")
	o.ready = c.String("notify-ready")
	o.notify = newNotifier(o.ready)
	if o.req.Steal {
		// A holder that has not let go after twice our grace (stopped,
		// or a COMMAND that ignores SIGTERM under a longer --grace) is
		// killed; its COMMAND dies with it and the orphan fence waits
		// for that before ours starts.
		o.req.KillAfter = max(2*o.grace, time.Second)
	}
	if o.name == "" {
		o.name = deriveName(argv)
	}
	o.req.OnPolling = func(why string) {
		o.logf("waiting for %s by polling (every 1ms to 100ms): %s", o.name, why)
	}
	return o
}

// fitGrace takes the --grace that a GraceFitter backend fits its terms to.
func (o *runOptions) fitGrace(lk *opened) error {
	g, note, err := lk.fitGrace(o.grace, o.graceSet)
	if err != nil || g == o.grace {
		return err
	}
	o.logf("%s", note)
	o.grace = g
	if o.req.Steal {
		o.req.KillAfter = max(2*o.grace, time.Second)
	}
	return nil
}

// check refuses contradictory flags, and turns -w 0 into -n.
func (o *runOptions) check() error {
	switch {
	case o.conflict < 0 || o.conflict > 255:
		return usageErrorf("leaderrun: -E %d is out of range; give an exit code from 0 to 255", o.conflict)
	case o.req.IfAvailable && o.waitSet:
		return usageErrorf("leaderrun: -n and -w contradict each other; use -n to never wait, or -w DURATION to wait that long")
	case o.req.StealStopped > 0 && o.req.IfAvailable:
		return usageErrorf("leaderrun: --steal-stopped and -n contradict each other; -n never waits behind a holder")
	case o.req.Steal && o.req.IfAvailable:
		return usageErrorf("leaderrun: --steal and -n contradict each other; --steal always takes the lock")
	case o.req.Steal && o.waitSet:
		return usageErrorf("leaderrun: --steal and -w contradict each other; --steal always takes the lock")
	case o.exclusive && o.req.Mode == elect.Shared:
		return usageErrorf("leaderrun: -s (shared) and -x (exclusive) contradict each other; give one of them (exclusive is the default)")
	case o.req.Steal && o.req.Mode == elect.Shared:
		return usageErrorf("leaderrun: --steal works only in exclusive mode; drop -s")
	case o.fanout && o.req.Mode == elect.Shared:
		return usageErrorf("leaderrun: --fanout works only in exclusive mode (shared holders serve no bus); drop -s or --fanout")
	case o.ready != readyLead && o.ready != readyStart && o.ready != readyCommand:
		return usageErrorf("leaderrun: --notify-ready %q is not a mode; use lead, start or command", o.ready)
	case o.restart != "never" && o.restart != "on-failure" && o.restart != "always":
		return usageErrorf("leaderrun: --restart %q is not a mode; use never, on-failure or always", o.restart)
	}
	if o.waitSet && o.wait == 0 {
		o.req.IfAvailable, o.waitSet = true, false
	}
	return nil
}

func (o *runOptions) logf(format string, args ...any) {
	if o.verbose {
		fmt.Fprintf(os.Stderr, "leaderrun: "+format+"\n", args...)
	}
}

func (o *runOptions) run(ctx context.Context) error {
	// Registered before anything else, so that a signal is never lost and
	// never kills leaderrun while COMMAND runs.
	// A signal ignored when leaderrun started (nohup's SIGHUP) stays
	// ignored, for leaderrun and so for COMMAND.
	sigs := make(chan os.Signal, 8)
	for _, s := range supervise.Forwarded() {
		if !signal.Ignored(s) {
			signal.Notify(sigs, s)
		}
	}
	defer signal.Stop(sigs)
	// Deferred first, so it runs last: told anyway when nothing said it
	// earlier (a signal, the end of the term).
	defer o.notify.stopping()

	lk, err := o.open()
	if err != nil {
		return o.explain(err)
	}
	defer lk.Close()
	o.notify.started()
	if err := o.fitGrace(lk); err != nil {
		return err
	}
	dir, err := filepath.Abs(lk.Dir())
	if err != nil {
		dir = lk.Dir()
	}
	if pid, ok := nestedIn(dir, o.name); ok {
		return exitf(ExitUsage, "leaderrun: %s is already held by this command's own leaderrun (pid %d), so it would wait for itself for ever; run the inner command directly, or give it another --name", o.name, pid)
	}

	if o.req.Steal {
		o.warnExternal(lk)
	}
	for {
		lead, err := o.acquire(ctx, lk, sigs)
		if err != nil {
			return err
		}
		again, err := o.term(ctx, lk, dir, lead, sigs)
		if !again {
			return err
		}
		// A backend whose terms can be lost (etcd, PostgreSQL: a
		// quorum lost, a session ended) lost this one before COMMAND
		// started: nothing ran, so queue again rather than leave the
		// name to nobody.
		o.logf("lost the term of %s before COMMAND started (%v); queueing again", o.name, rootCause(context.Cause(lead.Context())))
	}
}

// term is one term of lead: its fence and marker, the bus, and COMMAND
// for as long as the term lasts. again says that the term was lost (as
// acquire's lostPlace) before COMMAND ever started: the caller queues
// again (found by the etcd module's TestQuorumLossWaiters: 1 or 2 of 20
// waiters exited 80 so).
func (o *runOptions) term(ctx context.Context, lk *opened, dir string, lead *elect.Leadership, sigs <-chan os.Signal) (again bool, err error) {
	o.commandStarted = false
	defer func() {
		again = err != nil && !o.commandStarted && !o.req.IfAvailable && lostPlace(context.Cause(lead.Context()))
	}()
	// Deferred first, so it runs last; and only after lead returns,
	// which is after COMMAND is stopped.
	defer lead.Release()
	o.logf("leading %s (epoch %d, %s)", o.name, lead.Epoch(), lead.Mode())
	o.notify.leading(o.name, lead.Epoch())
	// Deferred after lead.Release, so it runs before it: the marker goes
	// only once COMMAND has been stopped.
	tm := supervise.Begin(ctx, lead, dir)
	defer tm.End()
	if err := tm.Expire(lk.termToken(lead), lead, o.grace); err != nil {
		if errors.Is(err, supervise.ErrNoWatchdog) {
			err = exitf(ExitOSErr, "leaderrun: %v; COMMAND was not started", err)
		}
		return false, err
	}

	// An exclusive leader serves NAME's bus, for publish, subscribe and
	// --fanout; it stops serving (deferred later, so earlier) before it
	// releases the lock. It listens before COMMAND starts, so that a
	// COMMAND may publish at once.
	srv, stopServing := o.serveBus(lk.bus(), lead)
	defer stopServing()
	return false, o.lead(lead, tm, dir, srv, sigs)
}

// serveBus serves NAME's bus for an exclusive leadership; srv is nil
// when it does not. stop ends the serving and returns once it has ended.
func (o *runOptions) serveBus(b busPort, lead *elect.Leadership) (srv BusServer, stop func()) {
	if lead.Mode() != elect.Exclusive {
		return nil, func() {}
	}
	srv, err := b.ListenBus(lead)
	if err != nil {
		// The cause only: the error names the socket by its internal,
		// descriptor-relative path (/proc/self/fd/N/NAME.sock.tmp).
		o.logf("not serving the bus of %s: %v", o.name, rootCause(err))
		return nil, func() {}
	}
	// Stopped through Serve's ctx, not Close: Close racing a Serve that
	// has not started yet trips the race detector (WaitGroup Add
	// concurrent with Wait) in bus.
	bctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(bctx)
	}()
	return srv, func() {
		cancel()
		<-served
	}
}

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
	gotSig := make(chan struct{})
	wg.Go(func() {
		select {
		case got = <-sigs:
			cancel(signalled{got})
			close(gotSig)
		case <-done:
		}
	})
	o.whileWaiting(actx, lk, &wg, done)
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
	close(done)
	wg.Wait()
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

// whileWaiting starts, on wg until done is closed, what runs while this
// instance waits in line: the -v queue report and the --fanout follower.
func (o *runOptions) whileWaiting(ctx context.Context, lk *opened, wg *sync.WaitGroup, done <-chan struct{}) {
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
		wg.Go(func() { followLeader(fctx, lk.bus(), o.name) })
	}
	// Returns at once unless lk can end a dead holder's term (etcd).
	wg.Go(func() { watchLocalHolder(fctx, lk, o.name) }) // localholder_linux.go
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

// explain is explainIn for the lock directory in use.
func (o *runOptions) explain(err error) error {
	if o.dir == "" {
		return explainIn(elect.DefaultDir(), false, err)
	}
	return explainIn(o.dir, true, err)
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
		if err != nil {
			return
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

// env is COMMAND's environment: leaderrun's, with the term's name, epoch
// (the fencing token), directory, and leaderrun's pid.
func (o *runOptions) env(dir string, lead *elect.Leadership) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "LEADERRUN_NAME", "LEADERRUN_EPOCH", "LEADERRUN_DIR", "LEADERRUN_PID":
			continue
		case "NOTIFY_SOCKET":
			if !o.notify.passOn() {
				continue // leaderrun speaks for the service (sdnotify.go)
			}
		}
		env = append(env, kv)
	}
	return append(env,
		"LEADERRUN_NAME="+o.name,
		"LEADERRUN_EPOCH="+strconv.FormatUint(lead.Epoch(), 10),
		"LEADERRUN_DIR="+dir,
		"LEADERRUN_PID="+strconv.Itoa(os.Getpid()),
	)
}

// lead runs COMMAND for as long as the term lasts and the restart policy
// wants it, and returns the exit status.
func (o *runOptions) lead(lead *elect.Leadership, tm *supervise.Term, dir string, srv BusServer, sigs <-chan os.Signal) error {
	env := tm.Environ(o.env(dir, lead))
	var stdout io.Writer = os.Stdout
	if o.fanout && srv != nil {
		tee := &lineTee{w: os.Stdout, srv: srv}
		defer tee.flush()
		stdout = tee
	}
	backoff := backoffStart
	finishing := false
	hup := supervise.WatchHangup()
	for {
		if err := o.overdue(lead); err != nil {
			return err
		}
		ch, err := tm.Start(o.argv, env, stdout)
		if err != nil {
			return startFailure(o.argv[0], err)
		}
		o.commandStarted = true
		status, err := o.supervise(ch, lead, sigs, hup, &finishing)
		if err != nil {
			return err
		}
		if finishing || !o.restarts(status) {
			return silentExit(status)
		}
		if time.Since(ch.Started()) >= resetAfter {
			backoff = backoffStart
		}
		o.logf("COMMAND exited with status %d; restarting in %s (--restart %s)", status, backoff, o.restart)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case s := <-sigs:
			t.Stop()
			if supervise.Terminating(s) {
				return silentExit(ExitSignalBase + supervise.SignalNumber(s))
			}
		case <-hup:
			t.Stop()
			return silentExit(ExitSignalBase + int(syscall.SIGHUP))
		case <-lead.Done():
			t.Stop()
			return o.ended(lead)
		}
		backoff = min(2*backoff, backoffMax)
	}
}

func (o *runOptions) restarts(status int) bool {
	switch o.restart {
	case "always":
		return true
	case "on-failure":
		return status != 0
	}
	return false
}

// supervise forwards signals to COMMAND until it exits or the term ends,
// then stops whatever COMMAND left behind. The first terminating signal
// (SIGINT, SIGTERM, SIGHUP, SIGQUIT), or the terminal hanging up (hup), is
// forwarded and gives COMMAND --grace to finish; then its processes get
// SIGKILL. A second terminating signal sends SIGKILL at once; the SIGHUP
// that comes with a hang-up is not a second one.
func (o *runOptions) supervise(ch *supervise.Command, lead *elect.Leadership, sigs <-chan os.Signal, hup <-chan struct{}, finishing *bool) (int, error) {
	var graceOver <-chan time.Time
	hungUp := false
	finish := func(s os.Signal) {
		switch {
		case *finishing && hungUp && s == syscall.SIGHUP:
		case *finishing:
			o.logf("%v again; killing COMMAND (SIGKILL)", s)
			ch.Kill()
		default:
			*finishing = true
			o.notify.stopping()
			ch.Signal(s)
			t := time.NewTimer(o.grace)
			graceOver = t.C
		}
	}
	for {
		select {
		case <-ch.Done():
			ch.Stop(o.grace, sigs)
			if err := o.overdue(lead); err != nil {
				return 0, err // the watchdog stopped COMMAND
			}
			return ch.Status(), nil
		case s := <-sigs:
			if supervise.Terminating(s) {
				finish(s)
			} else {
				ch.Signal(s)
			}
		case <-hup:
			hup = nil
			o.logf("the terminal hung up; stopping COMMAND (grace %s)", o.grace)
			if !*finishing {
				finish(syscall.SIGHUP)
			}
			hungUp = true
		case <-ch.Stopped():
			if !*finishing {
				o.logf("COMMAND was stopped; stopping too, until continued")
				ch.Suspend()
			}
		case <-graceOver:
			graceOver = nil
			o.logf("COMMAND still runs %s after it was told to stop; killing it (SIGKILL)", o.grace)
			ch.Kill()
		case <-lead.Done():
			o.notify.stopping()
			o.logf("leadership of %s ended (%v); stopping COMMAND (grace %s)", o.name, lead.Err(), o.grace)
			ch.Stop(o.grace, sigs)
			return 0, o.ended(lead)
		}
	}
}

// overdue returns the exit for a term that is over, though this leaderrun
// may not have noticed yet: it ended, or its deadline passed while this
// leaderrun was stopped or starved (the watchdog then stops COMMAND).
// COMMAND must not start, or be reported as if it had run its course.
func (o *runOptions) overdue(lead *elect.Leadership) error {
	if lead.Err() != nil {
		return o.ended(lead)
	}
	if at, _, ok := lead.Deadline(); ok && !time.Now().Before(at) {
		return exitf(ExitLockLost, "leaderrun: the term of %s (epoch %d) passed its deadline while this leaderrun was stopped or starved, so its lease may have gone to another host; COMMAND was stopped", o.name, lead.Epoch())
	}
	return nil
}

// lockDenied reports whether NAME's lock file in dir can no longer be
// looked at for want of permission: the directory's mode was taken away
// (chmod 000), which the election layer sees as a lock file gone.
func lockDenied(dir, name string) bool {
	if dir == "" {
		return false
	}
	_, err := os.Lstat(elect.LockPath(dir, name))
	return errors.Is(err, fs.ErrPermission)
}

func (o *runOptions) ended(lead *elect.Leadership) error {
	// A lock directory removed under the holder (a cleaner, logout, rm
	// -rf) is no steal, whatever the election layer took it for.
	if dir := lead.Dir(); dir != "" {
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			fix := "create it again (mkdir -m 700 " + dir + ") and keep cleaners away from it"
			if o.dir == "" {
				fix = "run leaderrun again to create it"
			}
			return exitf(ExitNoPerm, "leaderrun: the lock directory %s was removed while this leaderrun led %s (epoch %d); COMMAND was stopped; %s", dir, o.name, lead.Epoch(), fix)
		}
	}
	if err := lead.Err(); errors.Is(err, elect.ErrStolen) {
		return exitf(ExitStolen, "leaderrun: leadership of %s (epoch %d) was stolen; COMMAND was stopped", o.name, lead.Epoch())
	} else if errors.Is(err, elect.ErrSessionLost) {
		return exitf(ExitLockLost, "leaderrun: the term of %s (epoch %d) was lost with its session (%v); COMMAND was stopped; another host may lead now", o.name, lead.Epoch(), rootCause(err))
	} else if errors.Is(err, elect.ErrLockLost) && lockDenied(lead.Dir(), o.name) {
		return exitf(ExitNoPerm, "leaderrun: this leaderrun lost its access to the lock directory %s (permission denied: its mode or owner was changed, e.g. chmod 000) while it led %s (epoch %d), so it could no longer check that it still held the lock; COMMAND was stopped; give the directory back to its owner, private (chmod 700 %s), and run again", lead.Dir(), o.name, lead.Epoch(), lead.Dir())
	} else if errors.Is(err, elect.ErrLockLost) {
		return exitf(ExitLockLost, "leaderrun: the lock file %s was removed or replaced while this leaderrun led %s (epoch %d); COMMAND was stopped; keep cleaners away from the lock directory", elect.LockPath(lead.Dir(), o.name), o.name, lead.Epoch())
	} else {
		return exitf(ExitSoftware, "leaderrun: leadership of %s (epoch %d) ended: %v; COMMAND was stopped", o.name, lead.Epoch(), err)
	}
}
