package elect

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Backend is what an Elector needs from a lock service. *Locker is the
// flock backend; another (etcd, say) can satisfy the same contract: the
// same modes, FIFO order, strictly growing epochs, and Query.
type Backend interface {
	Acquire(ctx context.Context, name string, req Request) (*Leadership, error)
	Query(ctx context.Context, name string) (Snapshot, error)
}

// Role is where an Elector stands.
type Role int

const (
	// Follower: queued, waiting for leadership.
	Follower Role = iota
	// Leader: holds leadership; the lead function runs.
	Leader
	// Stopped: no longer taking part.
	Stopped
)

func (r Role) String() string {
	switch r {
	case Leader:
		return "leader"
	case Stopped:
		return "stopped"
	}
	return "follower"
}

// Elector takes part in an election for one name, the way a browser tab
// does with navigator.locks.request(name, callback): it queues, leads while
// its callback runs, and can step down.
//
// Two ways out are kept apart: Abdicate gives up leadership (and with
// Requeue joins again at the tail); cancelling Run's context stops taking
// part altogether.
type Elector struct {
	// Backend grants leadership. Required.
	Backend Backend
	// Name is the lock name. Required.
	Name string
	// Request says how to ask (mode, steal, ...). Default: exclusive,
	// waiting in line.
	Request Request
	// Requeue joins the queue again, at the tail, after each term ends,
	// whether by Abdicate, by a steal, by the loss of the lock file
	// (ErrLockLost) or of the backend's session (ErrSessionLost, also for
	// a request that lost it while waiting), or by lead returning nil.
	// Default false: Run returns after one term. (Curator's auto-requeue.)
	Requeue bool
	// OnRole, if set, is told of every role change, in order, from
	// Run's goroutine.
	OnRole func(Role, *Leadership)
	// AcceptHandoff lets a leader hand the lock to this Elector out of
	// turn while it waits (YieldTo): its request carries a random
	// hand-over id among its labels (so at most 15 of its own), and it
	// watches the queue directory for being named (inotify, Linux; no
	// polling). Exclusive requests on the flock backend only; ignored
	// otherwise.
	AcceptHandoff bool

	mu     sync.Mutex
	cur    *Leadership
	cancel context.CancelCauseFunc // ends the current lead function
}

// Run takes part until ctx ends, lead fails, or (without Requeue) one term
// is over. lead runs while this process leads, with a context that ends
// when leadership ends; it should return promptly then. Run releases
// leadership after lead returns. It returns nil when ctx ends after this
// Elector has led at least once (a clean stop), an error matching
// [ErrNeverLed] and ctx's cause when ctx ends before any grant (a steal
// that gave up after deposing the holder also matches
// [ErrStealAbandoned]), lead's error if lead fails, and the backend's
// error if asking fails.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context, l *Leadership) error) error {
	if e.Backend == nil || lead == nil {
		return errors.New("elect: Elector needs a Backend and a lead function")
	}
	if err := ValidateName(e.Name); err != nil {
		return err
	}
	defer e.role(Stopped, nil)
	led := false
	for {
		e.role(Follower, nil)
		var l *Leadership
		var err error
		if lk, ok := e.acceptsHandoff(); ok {
			l, err = e.acquireOrHandoff(ctx, lk)
		} else {
			l, err = e.Backend.Acquire(ctx, e.Name, e.Request)
		}
		if err != nil {
			switch {
			case ctx.Err() == nil && e.Requeue && errors.Is(err, ErrSessionLost):
				continue // the request's session was lost: ask anew
			case ctx.Err() == nil:
				return err
			case led:
				return nil
			case errors.Is(err, ErrStealAbandoned):
				return fmt.Errorf("%w: %w", ErrNeverLed, err)
			}
			return fmt.Errorf("%w: %w", ErrNeverLed, context.Cause(ctx))
		}
		led = true
		e.role(Leader, l)
		werr := e.lead(ctx, l, lead)
		l.Release()
		switch {
		case werr != nil && !termEnded(werr):
			return werr
		case ctx.Err() != nil:
			return nil
		case !e.Requeue:
			return nil
		}
	}
}

// termEnded reports whether err, from the lead function, only says that
// the term ended from outside (stolen, released, the lock file lost, the
// backend's session lost, ctx cancelled): with Requeue the Elector then
// queues again.
func termEnded(err error) bool {
	for _, e := range []error{context.Canceled, ErrReleased, ErrStolen, ErrLockLost, ErrSessionLost} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// lead runs the callback with a context that ends when either the term or
// ctx ends.
func (e *Elector) lead(ctx context.Context, l *Leadership, lead func(context.Context, *Leadership) error) error {
	lctx, cancel := context.WithCancelCause(l.Context())
	defer cancel(nil)
	e.set(l, cancel)
	defer e.set(nil, nil)
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer stop()
	return lead(lctx, l)
}

// Abdicate gives up the current leadership, if any: the lead function's
// context ends with ErrReleased, and once lead has returned the lock goes
// to the next in line, so the old and new leaders' work never overlap.
// With Requeue the Elector then queues again at the tail.
func (e *Elector) Abdicate() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cancel != nil {
		e.cancel(ErrReleased)
	}
}

// Leadership returns the current term, or nil when not leading.
func (e *Elector) Leadership() *Leadership {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cur
}

func (e *Elector) set(l *Leadership, cancel context.CancelCauseFunc) {
	e.mu.Lock()
	e.cur, e.cancel = l, cancel
	e.mu.Unlock()
}

func (e *Elector) role(r Role, l *Leadership) {
	if e.OnRole != nil {
		e.OnRole(r, l)
	}
}
