package instance

import (
	"errors"
	"io"
	"sync"
	"time"
)

// Invocation is one launch of the program as the primary sees it: its
// own (Local) or one forwarded by a later launch.
type Invocation struct {
	// ID is unique to the launch; a retried forward carries the same ID
	// and is never delivered twice.
	ID string
	// Args are the launch's arguments (os.Args[1:] unless the caller set
	// Options.Args), byte for byte: never joined, split or reordered.
	Args [][]byte
	// Cwd is the caller's working directory.
	Cwd string
	// Env holds the caller's variables named in its Options.Env, as
	// "NAME=value"; none unless asked for.
	Env []string
	// PID and UID are the caller's, as the kernel reported them (UID is
	// always the primary's own: other users are refused).
	PID, UID int
	// Local is set for the primary's own launch.
	Local bool
	// Deadline is when the caller stops waiting for acceptance; zero for
	// the local invocation. With Options.ManualAccept, an invocation
	// not accepted by then is refused.
	Deadline time.Time
	// Stdout and Stderr reach the caller's standard output and error,
	// streamed while the invocation runs. Writes after Done fail.
	Stdout, Stderr io.Writer
	// Stdin is the caller's Options.Stdin, streamed as the application
	// reads it; nil when the caller sends none.
	Stdin io.Reader

	st *invState
}

// Strings returns Args as strings (which may hold invalid UTF-8).
func (inv *Invocation) Strings() []string {
	out := make([]string, len(inv.Args))
	for i, a := range inv.Args {
		out[i] = string(a)
	}
	return out
}

// Done ends the invocation: the caller prints what was written and exits
// with exit. It accepts the invocation first, if need be; a refused one
// (see Accept) stays refused. Later calls do nothing.
func (inv *Invocation) Done(exit int) {
	if inv.Accept() {
		inv.st.finish(exit, false)
	}
}

// Accept is for a primary run with Options.ManualAccept: it tells the
// caller that the invocation is taken (the first phase). It returns false
// if the caller's deadline passed first: the caller has reported the
// primary as not responding, and the invocation must be dropped, not run.
// Without ManualAccept, taking the invocation from Invocations accepted it
// and Accept returns true.
func (inv *Invocation) Accept() bool { return inv.st.accept() }

// errDone is returned by writes after Done.
var errDone = errors.New("instance: invocation already done")

// invState is what the primary keeps of an invocation: its output until
// the caller has read it, and how it ended.
type invState struct {
	id        string
	mu        sync.Mutex
	accepted  chan struct{} // closed once the application accepted it
	refused   bool          // the caller's deadline passed before that
	out, err  []byte
	done      bool
	exit      int
	abandoned bool
	changed   chan struct{} // closed and replaced on every change
	onDone    func()
	stdinW    *io.PipeWriter // the caller's stdin, when sent
}

func newInvState(id string) *invState {
	return &invState{id: id, accepted: make(chan struct{}), changed: make(chan struct{})}
}

func (s *invState) accept() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused {
		return false
	}
	select {
	case <-s.accepted:
	default:
		close(s.accepted)
	}
	return true
}

// refuse marks an invocation not accepted in time; it fails if it was.
func (s *invState) refuse() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.accepted:
		return false
	default:
		s.refused = true
		return true
	}
}

func (s *invState) isAccepted() bool {
	select {
	case <-s.accepted:
		return true
	default:
		return false
	}
}

func (s *invState) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *invState) finish(exit int, abandoned bool) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	s.done, s.exit, s.abandoned = true, exit, abandoned
	s.notifyLocked()
	f := s.onDone
	w := s.stdinW
	s.mu.Unlock()
	if w != nil {
		w.CloseWithError(errDone) // a caller still sending learns it
	}
	if f != nil {
		f()
	}
}

type stream struct {
	s   *invState
	err bool
}

func (w stream) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.s.done {
		return 0, errDone
	}
	if w.err {
		w.s.err = append(w.s.err, p...)
	} else {
		w.s.out = append(w.s.out, p...)
	}
	w.s.notifyLocked()
	return len(p), nil
}

// chunk returns the output past the offsets, at most maxChunk of each
// stream, and whether that is the end; ch is closed at the next change.
func (s *invState) chunk(outOff, errOff int64) (r wireReply, ch <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	take := func(b []byte, off int64) []byte {
		if off < 0 || off >= int64(len(b)) {
			return nil
		}
		b = b[off:]
		if len(b) > maxChunk {
			b = b[:maxChunk]
		}
		return b
	}
	r.Out, r.Err = take(s.out, outOff), take(s.err, errOff)
	if s.done && outOff+int64(len(r.Out)) >= int64(len(s.out)) && errOff+int64(len(r.Err)) >= int64(len(s.err)) {
		r.Done, r.Exit, r.Abandoned = true, s.exit, s.abandoned
	}
	return r, s.changed
}
