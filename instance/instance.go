package instance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/elect"
)

// Options configures Run. The zero value forwards os.Args[1:] and the
// working directory, no environment, and waits 5 seconds for a primary to
// accept.
type Options struct {
	// Dir is the lock directory. Default: elect.DefaultDir(), private to
	// the user and the same from every environment (see Scope).
	Dir string
	// GroupShared accepts a lock directory writable by its group (see
	// elect.Config). Invocations still never cross users.
	GroupShared bool
	// Args are the arguments forwarded, as bytes. Default: os.Args[1:].
	Args [][]byte
	// Env names the variables forwarded with the invocation; "*" forwards
	// all. Default: none (variables may hold secrets).
	Env []string
	// AckTimeout bounds how long a launch waits for a primary to accept
	// its invocation: the time a stopped or hung primary can cost.
	// Default 5s.
	AckTimeout time.Duration
	// Replace takes the name over from a primary that did not accept in
	// time: its term is stolen, and it is killed with SIGKILL if it still
	// holds the lock KillAfter later. This launch then becomes the
	// primary. Default false: Run fails with ErrNotResponding.
	Replace bool
	// KillAfter, with Replace, is how long a replaced primary has to let
	// go before SIGKILL. Default 2s.
	KillAfter time.Duration
	// Stdin, if set, is streamed to the primary's application as
	// Invocation.Stdin, as fast as it reads it (`cat f | app -`). Default
	// nil: nothing is sent, and Invocation.Stdin is nil. The local
	// invocation's Stdin is this reader too.
	Stdin io.Reader
	// Stdout and Stderr receive the primary's output for a forwarded
	// invocation, and are the local invocation's. Default os.Stdout and
	// os.Stderr.
	Stdout, Stderr io.Writer
	// ID identifies the invocation. Default: 128 random bits. Give the
	// same ID to a retry so that it is never run twice.
	ID string
	// Command is recorded in the lock's ticket for `leaderrun status`.
	// Default os.Args.
	Command []string
	// ForwardOnly never becomes the primary: with nobody holding the
	// name, Run fails with ErrNoPrimary (for `leaderrun send`).
	ForwardOnly bool
	// ManualAccept, for the primary: the application accepts each
	// forwarded invocation itself with Invocation.Accept (or Done), for
	// an application that hands invocations on (as `leaderrun
	// --single-instance` does to COMMAND) and can only say it has them
	// once they arrived. Default false: taking an invocation from
	// Invocations accepts it.
	ManualAccept bool
	// OnForward, if set, is called once the primary has accepted a
	// forwarded invocation (the first phase), with its pid.
	OnForward func(primaryPID int)
}

// Result is how Run ended.
type Result struct {
	// Primary is set when this process was the primary and ran the
	// primary function.
	Primary bool
	// Exit is the exit status: the primary's answer to a forwarded
	// invocation, or what the primary's own invocation was Done with.
	Exit int
	// PID is the primary's (this process's own when Primary).
	PID int
}

// Run makes this process the primary of name, or forwards its invocation
// to the primary that is.
//
// As the primary it serves name's bus and calls primary, whose ctx ends
// when ctx ends or the lock is lost; primary receives every invocation,
// its own first, from p.Invocations. Run returns once primary has
// returned, with Result.Primary set and primary's error.
//
// Otherwise it forwards the invocation, copies the primary's output to
// Options.Stdout and Stderr as it comes, and returns the primary's exit
// status in Result.Exit. A primary that does not accept in
// Options.AckTimeout gives a *NotRespondingError (ErrNotResponding), or
// is replaced with Options.Replace. A primary that ends before accepting
// leaves the invocation to this process, which becomes the primary if it
// is next in line, or forwards to the next primary; one that ends after
// accepting gives ErrAcceptedLost. Cancelling ctx abandons the wait and
// returns ctx's error; an invocation already accepted may still run.
func Run(ctx context.Context, name string, opts Options, primary func(ctx context.Context, p *Primary) error) (Result, error) {
	if primary == nil {
		return Result{}, errors.New("instance: Run needs a primary function")
	}
	if err := elect.ValidateName(name); err != nil {
		return Result{}, err
	}
	o, err := opts.withDefaults()
	if err != nil {
		return Result{}, err
	}
	// An empty Dir goes to elect as it is, so that the default directory
	// is made when missing, as for every other leaderrun process.
	lk, err := elect.Open(elect.Config{Dir: o.Dir, GroupShared: o.GroupShared})
	if err != nil {
		return Result{}, err
	}
	defer lk.Close()
	o.Dir = lk.Dir()
	r := &runner{name: name, o: o, lk: lk, primary: primary}
	return r.run(ctx)
}

func (o Options) withDefaults() (Options, error) {
	if o.AckTimeout < 0 || o.KillAfter < 0 {
		return o, fmt.Errorf("instance: negative AckTimeout or KillAfter")
	}
	if o.ForwardOnly && o.Replace {
		return o, fmt.Errorf("instance: ForwardOnly and Replace contradict each other")
	}
	if o.AckTimeout == 0 {
		o.AckTimeout = 5 * time.Second
	}
	if o.KillAfter == 0 {
		o.KillAfter = 2 * time.Second
	}
	if o.Args == nil {
		for _, a := range os.Args[1:] {
			o.Args = append(o.Args, []byte(a))
		}
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.ID == "" {
		o.ID = NewID()
	}
	if len(o.ID) > 128 {
		return o, fmt.Errorf("instance: ID of %d bytes is too long (at most 128)", len(o.ID))
	}
	return o, nil
}

// NewID returns a random invocation ID.
func NewID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// environ returns the variables named in names ("*": all).
func environ(names []string) [][]byte {
	if len(names) == 0 {
		return nil
	}
	all := false
	want := map[string]bool{}
	for _, n := range names {
		if n == "*" {
			all = true
		}
		want[n] = true
	}
	var out [][]byte
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if all || want[k] {
			out = append(out, []byte(kv))
		}
	}
	return out
}
