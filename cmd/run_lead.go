package cmd

import (
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/supervise"
)

// Leading: COMMAND's environment, its runs and restarts within one term,
// supervised (package supervise), with signals forwarded.

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

// finisher is how supervise stops COMMAND on a terminating signal.
type finisher struct {
	o         *runOptions
	ch        *supervise.Command
	finishing *bool
	hungUp    bool             // the terminal hung up: its SIGHUP is no second signal
	graceOver <-chan time.Time // fires --grace after the first signal
}

// finish forwards the first terminating signal s and gives COMMAND
// --grace; a second one kills it at once.
func (f *finisher) finish(s os.Signal) {
	switch {
	case *f.finishing && f.hungUp && s == syscall.SIGHUP:
	case *f.finishing:
		f.o.logf("%v again; killing COMMAND (SIGKILL)", s)
		f.ch.Kill()
	default:
		*f.finishing = true
		f.o.notify.stopping()
		f.ch.Signal(s)
		f.graceOver = time.NewTimer(f.o.grace).C
	}
}

// supervise forwards signals to COMMAND until it exits or the term ends,
// then stops whatever COMMAND left behind. The first terminating signal
// (SIGINT, SIGTERM, SIGHUP, SIGQUIT), or the terminal hanging up (hup), is
// forwarded and gives COMMAND --grace to finish; then its processes get
// SIGKILL. A second terminating signal sends SIGKILL at once; the SIGHUP
// that comes with a hang-up is not a second one.
func (o *runOptions) supervise(ch *supervise.Command, lead *elect.Leadership, sigs <-chan os.Signal, hup <-chan struct{}, finishing *bool) (int, error) {
	f := &finisher{o: o, ch: ch, finishing: finishing}
	finish := f.finish
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
			f.hungUp = true
		case <-ch.Stopped():
			if !*finishing {
				o.logf("COMMAND was stopped; stopping too, until continued")
				ch.Suspend()
			}
		case <-f.graceOver:
			f.graceOver = nil
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
