package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderrun/leaderrun/instance"

	"github.com/leaderrun/leaderrun/supervise"
)

// singleRun is the primary's side: COMMAND, and the bridge between
// forwarded invocations and its descriptors.
type singleRun struct {
	o       *runOptions
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
	ch, invW, repR, err := s.startCommand(p, own)
	if err != nil || ch == nil {
		return err
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
	s.serve(ctx, p, own, ch, lines, stopped)
	return nil
}

// startCommand starts COMMAND with the invocations' pipe (its descriptor
// invocationsFD) and the replies' (repliesFD), and returns it with this
// end of each. A COMMAND that does not start ends own with its exit
// status (and s.err): ch is nil then.
func (s *singleRun) startCommand(p *instance.Primary, own *instance.Invocation) (ch *supervise.Command, invW, repR *os.File, err error) {
	invR, invW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		invR.Close()
		invW.Close()
		return nil, nil, nil, err
	}
	dir := p.Leadership().Dir()
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	env := append(s.o.env(dir, p.Leadership()),
		fmt.Sprintf("LEADERRUN_INVOCATIONS_FD=%d", invocationsFD), fmt.Sprintf("LEADERRUN_REPLIES_FD=%d", repliesFD))
	ch, err = supervise.Start(s.o.argv, env, os.Stdout, func(cmd *exec.Cmd) { cmd.ExtraFiles = []*os.File{invR, repW} })
	invR.Close()
	repW.Close()
	if err != nil {
		invW.Close()
		repR.Close()
		s.err = startFailure(s.o.argv[0], err)
		own.Done(ExitCode(s.err))
		return nil, nil, nil, nil
	}
	return ch, invW, repR, nil
}

// serve hands the invocations to COMMAND as lines until it exits or the
// term ends, forwarding signals as the default action does, and ends own
// with COMMAND's status.
func (s *singleRun) serve(ctx context.Context, p *instance.Primary, own *instance.Invocation, ch *supervise.Command, lines chan []byte, stopped <-chan struct{}) {
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
			case <-ch.Done():
				// Exiting: the next round says so.
			}
			if inv.Stdin != nil {
				go copyStdin(inv, lines, stopped)
			}
		case <-ch.Done():
			ch.Stop(s.o.grace, s.sigs)
			own.Done(ch.Status())
			return
		case sig := <-s.sigs:
			switch {
			case !supervise.Terminating(sig):
				ch.Signal(sig)
			case finishing:
				ch.Kill()
			default:
				finishing = true
				ch.Signal(sig)
				graceOver = time.After(s.o.grace)
			}
		case <-graceOver:
			graceOver = nil
			ch.Kill()
		case <-ctx.Done():
			ch.Stop(s.o.grace, s.sigs)
			if lead := p.Leadership(); lead.Err() != nil {
				s.err = s.o.ended(lead)
			}
			own.Done(ch.Status())
			return
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
				fmt.Fprintf(os.Stderr, "leaderrun: COMMAND wrote a line on fd %d that is not a reply ({\"id\":...}); ignored: %.80q\n", repliesFD, sc.Text())
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
