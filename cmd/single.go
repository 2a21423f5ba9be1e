package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/instance"
	"github.com/urfave/cli/v2"
)

// ExitAcceptedLost: the primary accepted the forwarded arguments and ended
// before answering; they were not run again.
const ExitAcceptedLost = 76

// The descriptors COMMAND gets as the primary of --single-instance.
const (
	invocationsFD = 3
	repliesFD     = 4
)

// singleFlags are the flags of --single-instance; app.go adds them to the
// default action's.
func singleFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{
			Name:  "single-instance",
			Usage: "the first instance runs COMMAND and hands it the ARGs of every later one (NDJSON on $LEADERRUN_INVOCATIONS_FD, answers on $LEADERRUN_REPLIES_FD); later ones print its answer and exit with its code (see SINGLE INSTANCE)",
		},
		&cli.StringSliceFlag{
			Name:  "forward-env",
			Usage: "with --single-instance or send: also forward the variable `NAME` (repeat, or NAME,NAME; * for all); none by default",
		},
		&cli.GenericFlag{
			Name:  "ack-timeout",
			Usage: "with --single-instance or send: how long the primary has to accept the ARGs (`DURATION`); then fail naming it, or replace it with --replace",
			Value: &durationValue{d: 5 * time.Second, set: true},
		},
		&cli.BoolFlag{
			Name:  "forward-stdin",
			Usage: "with --single-instance or send: stream stdin to the primary's COMMAND (lines {\"id\",\"stdin_base64\"} on fd 3, then {\"id\",\"stdin_eof\":true})",
		},
		&cli.BoolFlag{
			Name:  "replace",
			Usage: "with --single-instance: replace a primary that did not accept within --ack-timeout (its term is stolen, it is killed) and run COMMAND here",
		},
	}
}

const singleHelp = `SINGLE INSTANCE:
   leaderrun --single-instance --name APP -- COMMAND ARG...
   The first instance runs COMMAND ARG... with LEADERRUN_INVOCATIONS_FD=3
   and LEADERRUN_REPLIES_FD=4. Each later instance sends its ARGs (exact
   bytes), its working directory and the variables named by --forward-env;
   COMMAND reads one JSON object a line from fd 3:
     {"id":"…","args":["…"],"args_base64":["…"],"cwd":"…","env":["K=V"],
      "pid":N,"uid":N,"deadline_unix_ms":N}
   ("args" replaces bytes that are not UTF-8; "args_base64" is exact) and
   answers on fd 4, one JSON object a line:
     {"id":"…","accepted":true}       optional: taken, answer follows
     {"id":"…","stdout":"text"}       optional, repeatable (also "stderr",
                                      and "stdout_base64"/"stderr_base64")
     {"id":"…","exit":N}              done; the later instance exits N
   An id not accepted (or answered) by its deadline is refused: drop it.
   With --forward-stdin, the later instance's stdin follows its line on
   fd 3 as {"id":"…","stdin_base64":"…"} lines, then {"id","stdin_eof":true}.
   The later instance prints what COMMAND answered, and nothing else, and
   exits with its code; each failure prints one line naming the primary:
   75 it did not accept within --ack-timeout (stopped, hung, or not reading
   fd 3; --replace takes over), 76 it accepted and ended before answering
   (not run again), 77 it runs as another user. Without --name the name
   comes from COMMAND alone, not its ARGs: give --name when COMMAND is an
   interpreter (python3 app.py), or every script it runs would share one.
   leaderrun send APP -- ARG... forwards without ever running COMMAND
   (exit 1 when no primary runs).
`

// singleAction is the default action with --single-instance.
func singleAction(c *cli.Context) error {
	for _, f := range []string{"nonblock", "wait", "shared", "steal", "steal-stopped", "fanout"} {
		if c.IsSet(f) {
			return usageErrorf("leaderrun: --single-instance cannot be combined with --%s; a later instance forwards to the first, it never waits in line to run COMMAND", f)
		}
	}
	if c.String("restart") != "never" {
		return usageErrorf("leaderrun: --single-instance cannot be combined with --restart; the primary runs COMMAND once")
	}
	if !c.IsSet("name") {
		argv := c.Args().Slice()
		if len(argv) > 0 && argv[0] == "--" {
			argv = argv[1:]
		}
		if len(argv) > 0 {
			c.Set("name", deriveName(argv[:1]))
		}
	}
	o, err := runOptionsFrom(c)
	if err != nil {
		return err
	}
	ack, _ := durationFlag(c, "ack-timeout")
	if ack <= 0 {
		return usageErrorf("leaderrun: --ack-timeout must be positive")
	}
	dir := o.dir
	if dir == "" {
		dir = elect.DefaultDir()
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	s := &singleRun{o: o, dir: dir}
	sigs := make(chan os.Signal, 8)
	for _, sig := range forwarded {
		if !signal.Ignored(sig) {
			signal.Notify(sigs, sig)
		}
	}
	defer signal.Stop(sigs)
	// Until this instance is the primary, a terminating signal ends the
	// forward (the exit status says which); once it is, signals go to
	// COMMAND as in a plain run.
	s.sigs = make(chan os.Signal, 8)
	ctx, cancel := context.WithCancelCause(c.Context)
	defer cancel(nil)
	go func() {
		for sig := range sigs {
			if s.leading.Load() {
				s.sigs <- sig
			} else if terminating(sig) {
				cancel(signalled{sig})
			}
		}
	}()
	args := make([][]byte, len(o.argv)-1)
	for i, a := range o.argv[1:] {
		args[i] = []byte(a)
	}
	res, err := instance.Run(ctx, o.name, instance.Options{
		Dir: dir, GroupShared: c.Bool("group-shared"), Args: args, Env: forwardEnv(c),
		AckTimeout: ack, Replace: c.Bool("replace"), KillAfter: max(2*o.grace, time.Second),
		Command: o.argv, ManualAccept: true, Stdin: stdinIf(c.Bool("forward-stdin")),
	}, s.primary)
	if err != nil {
		var sig signalled
		if errors.As(context.Cause(ctx), &sig) {
			return exitf(ExitSignalBase+signalNumber(sig.sig), "leaderrun: %v while handing the arguments to the primary of %s; if it had accepted them, it goes on with them", sig.sig, o.name)
		}
		return singleError(o.name, err)
	}
	if res.Primary && s.err != nil {
		return s.err
	}
	return silentExit(res.Exit)
}

func stdinIf(on bool) io.Reader {
	if on {
		return os.Stdin
	}
	return nil
}

func forwardEnv(c *cli.Context) []string {
	var names []string
	for _, v := range c.StringSlice("forward-env") {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
	}
	return names
}

// singleError turns the library's failures into one line naming the
// primary, with the exit code of the contract.
func singleError(name string, err error) error {
	var nr *instance.NotRespondingError
	switch {
	case errors.As(err, &nr) && nr.PID == 0:
		return exitf(ExitConflict, "leaderrun: nobody accepted the arguments for %s within %v, and no holder of it can be seen; try again", name, nr.Wait)
	case errors.As(err, &nr):
		return exitf(ExitConflict, "leaderrun: the primary of %s, pid %d (epoch %d, since %s), did not accept the arguments within %v; state %s; it must read $LEADERRUN_INVOCATIONS_FD; give --replace to replace it",
			name, nr.PID, nr.Epoch, nr.Since.Format(time.RFC3339), nr.Wait, nr.State)
	case errors.Is(err, instance.ErrAcceptedLost):
		return exitf(ExitAcceptedLost, "leaderrun: %v; the arguments were not run again", err)
	case errors.Is(err, instance.ErrForeign):
		return exitf(ExitNoPerm, "leaderrun: %v; arguments are never forwarded to another user's primary", err)
	case errors.Is(err, instance.ErrNoPrimary):
		return exitf(ExitNoLeader, "leaderrun: no primary of %s is running; start one with leaderrun --single-instance --name %s -- COMMAND", name, name)
	case errors.Is(err, instance.ErrNotInstance):
		return exitf(ExitConflict, "leaderrun: %v; only a leaderrun --single-instance primary takes arguments", err)
	}
	return classify(err)
}

// singleRun is the primary's side: COMMAND, and the bridge between
// forwarded invocations and its descriptors.
type singleRun struct {
	o       *runOptions
	dir     string
	sigs    chan os.Signal // as the primary: the signals for COMMAND
	leading atomic.Bool
	err     error // how leading ended, when not by COMMAND's exit

	mu      sync.Mutex
	pending map[string]*instance.Invocation
}

// invocationLine is what COMMAND reads on fd 3.
type invocationLine struct {
	ID         string   `json:"id"`
	Args       []string `json:"args"`
	ArgsBase64 [][]byte `json:"args_base64"`
	Cwd        string   `json:"cwd"`
	Env        []string `json:"env"`
	PID        int      `json:"pid"`
	UID        int      `json:"uid"`
	Deadline   int64    `json:"deadline_unix_ms"`
}

// replyLine is what COMMAND writes on fd 4.
type replyLine struct {
	ID           string `json:"id"`
	Accepted     bool   `json:"accepted"`
	Stdout       string `json:"stdout"`
	Stderr       string `json:"stderr"`
	StdoutBase64 []byte `json:"stdout_base64"`
	StderrBase64 []byte `json:"stderr_base64"`
	Exit         *int   `json:"exit"`
}

func (s *singleRun) primary(ctx context.Context, p *instance.Primary) error {
	s.leading.Store(true)
	var own *instance.Invocation
	select {
	case own = <-p.Invocations():
	case <-ctx.Done():
		return nil
	}
	s.pending = map[string]*instance.Invocation{}
	invR, invW, err := os.Pipe()
	if err != nil {
		return err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		invR.Close()
		invW.Close()
		return err
	}
	env := append(s.o.env(s.dir, p.Leadership()),
		fmt.Sprintf("LEADERRUN_INVOCATIONS_FD=%d", invocationsFD), fmt.Sprintf("LEADERRUN_REPLIES_FD=%d", repliesFD))
	ch, err := startChild(s.o.argv, env, os.Stdout, func(cmd *exec.Cmd) { cmd.ExtraFiles = []*os.File{invR, repW} })
	invR.Close()
	repW.Close()
	if err != nil {
		invW.Close()
		repR.Close()
		s.err = err
		own.Done(ExitCode(err))
		return nil
	}
	lines := make(chan []byte, 1024)
	stopped := make(chan struct{})
	// lines is never closed: stdin copiers may still hold it; stopped
	// ends the writer and them.
	go writeLines(invW, lines, stopped)
	defer close(stopped)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		s.readReplies(repR)
	}()
	defer func() {
		// What COMMAND answered before it exited is still in the pipe:
		// read it to the end (bounded: a leftover grandchild may keep
		// the pipe open) before the answers still missing are given up.
		t := time.NewTimer(time.Second)
		select {
		case <-readDone:
		case <-t.C:
		}
		t.Stop()
		repR.Close()
		<-readDone
	}()

	var graceOver <-chan time.Time
	finishing := false
	for {
		select {
		case inv := <-p.Invocations():
			b, _ := json.Marshal(lineOf(inv))
			s.mu.Lock()
			s.pending[inv.ID] = inv
			s.mu.Unlock()
			select {
			case lines <- append(b, '\n'):
			case <-ch.done:
				// Exiting: the next round says so.
			}
			if inv.Stdin != nil {
				go copyStdin(inv, lines, stopped)
			}
		case <-ch.done:
			ch.stop(s.o.grace, s.sigs)
			own.Done(ch.status())
			return nil
		case sig := <-s.sigs:
			switch {
			case !terminating(sig):
				ch.signalGroup(sig)
			case finishing:
				ch.kill()
			default:
				finishing = true
				ch.signalGroup(sig)
				graceOver = time.After(s.o.grace)
			}
		case <-graceOver:
			graceOver = nil
			ch.kill()
		case <-ctx.Done():
			ch.stop(s.o.grace, s.sigs)
			if lead := p.Leadership(); lead.Err() != nil {
				s.err = s.o.ended(lead)
			}
			own.Done(ch.status())
			return nil
		}
	}
}

// copyStdin passes a forwarded stdin on to COMMAND, as lines on fd 3.
func copyStdin(inv *instance.Invocation, lines chan<- []byte, stopped <-chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := inv.Stdin.Read(buf)
		var line []byte
		switch {
		case n > 0:
			line, _ = json.Marshal(map[string]any{"id": inv.ID, "stdin_base64": buf[:n]})
		case err == io.EOF:
			line, _ = json.Marshal(map[string]any{"id": inv.ID, "stdin_eof": true})
		case err != nil:
			return // the invocation is done
		default:
			continue
		}
		select {
		case lines <- append(line, '\n'):
		case <-stopped:
			return
		}
		if n == 0 {
			return
		}
	}
}

func lineOf(inv *instance.Invocation) invocationLine {
	l := invocationLine{ID: inv.ID, Args: inv.Strings(), ArgsBase64: inv.Args, Cwd: inv.Cwd, Env: inv.Env, PID: inv.PID, UID: inv.UID, Deadline: inv.Deadline.UnixMilli()}
	if l.Env == nil {
		l.Env = []string{}
	}
	return l
}

// writeLines writes to COMMAND's fd 3 off the primary's loop, so that a
// COMMAND that does not read never holds leaderrun up: its invocations
// are simply not accepted in time.
func writeLines(w *os.File, lines <-chan []byte, stopped <-chan struct{}) {
	defer w.Close()
	broken := false
	for {
		select {
		case b := <-lines:
			if !broken {
				if _, err := w.Write(b); err != nil {
					broken = true // COMMAND closed fd 3: nothing accepts
				}
			}
		case <-stopped:
			return
		}
	}
}

// readReplies applies COMMAND's answers to the invocations they name.
func (s *singleRun) readReplies(r *os.File) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	warned := false
	for sc.Scan() {
		var rep replyLine
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil || rep.ID == "" {
			if !warned {
				fmt.Fprintf(os.Stderr, "leaderrun: COMMAND wrote a line on fd %d that is not a reply ({\"id\":…}); ignored: %.80q\n", repliesFD, sc.Text())
				warned = true
			}
			continue
		}
		s.mu.Lock()
		inv := s.pending[rep.ID]
		s.mu.Unlock()
		if inv == nil {
			continue // answered already, refused, or never asked
		}
		if !inv.Accept() {
			s.forget(rep.ID) // too late: its caller gave up
			continue
		}
		write := func(w interface{ Write([]byte) (int, error) }, text string, raw []byte) {
			if text != "" {
				w.Write([]byte(text))
			}
			if len(raw) > 0 {
				w.Write(raw)
			}
		}
		write(inv.Stdout, rep.Stdout, rep.StdoutBase64)
		write(inv.Stderr, rep.Stderr, rep.StderrBase64)
		if rep.Exit != nil {
			inv.Done(*rep.Exit)
			s.forget(rep.ID)
		}
	}
}

func (s *singleRun) forget(id string) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}
