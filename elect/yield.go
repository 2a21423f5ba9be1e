package elect

import "context"

// Yield steps aside only if another can take over, the way a leader that
// lost the user's attention hands its work to a visible peer: it looks at
// the request that would be granted next (the head of the line: a steal,
// else the oldest waiting one) and, if there is one and accept approves
// it, gives up leadership as Abdicate does and returns true. Otherwise it
// keeps leading, with no change of epoch, and returns false: a leader
// alone never churns terms.
//
// accept sees the head only, because the line is FIFO: stepping aside
// hands the lock to the head whoever it is. To hand it to a chosen
// waiter further back (the focused window's), use YieldTo. Pending.Labels carry what the
// waiting process said of itself (Request.Labels). The head may leave
// between the look and the hand-over; the lock then goes to the next in
// line, or back to this Elector with Requeue. ctx bounds the look.
func (e *Elector) Yield(ctx context.Context, accept func(Pending) bool) (bool, error) {
	lead := e.Leadership()
	if lead == nil || lead.Err() != nil {
		return false, nil
	}
	snap, err := e.Backend.Query(ctx, e.Name)
	if err != nil {
		return false, err
	}
	if len(snap.Pending) == 0 {
		return false, nil
	}
	head := snap.Pending[0]
	// A stopped head would be handed a lock it cannot use.
	if head.State == "stopped" || (accept != nil && !accept(head)) {
		return false, nil
	}
	// Still the same term: a steal or release since the look has already
	// ended it.
	if e.Leadership() != lead {
		return false, nil
	}
	e.Abdicate()
	return true, nil
}
