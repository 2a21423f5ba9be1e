package elect

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/leaderrun/leaderrun/oslock"
)

// A hand-over out of turn (YieldTo): the leader names the chosen waiter
// in the file .yield of the name's queue directory, and that waiter,
// which watches for the file while it waits (Elector.AcceptHandoff),
// asks again as a steal, which heads the line; the leader's term then
// ends as a steal ends it, and the lock goes to the chosen one. Waiters
// identify themselves by a random label, handoffLabel + 32 hex digits,
// which Query shows among their labels. The file (layout.go) holds
// "Y <leader's epoch> <chosen waiter's id>\n", is renamed into place, and
// is stale once that epoch's term is over.
const handoffLabel = "elect.handoff="

// handoffID returns the hand-over id among a request's labels.
func handoffID(labels []string) (string, bool) {
	for _, l := range labels {
		if id, ok := strings.CutPrefix(l, handoffLabel); ok && id != "" {
			return id, true
		}
	}
	return "", false
}

// YieldTo hands leadership to a chosen waiter, out of turn: the first
// waiting request, in the order of the line, that choose approves
// (Pending.Labels carry what it said of itself, as for Yield) among the
// waiting Electors that accept hand-overs (Elector.AcceptHandoff; a
// stopped one is skipped). With none, it returns false at once and this
// Elector keeps leading, with no new term. A nil choose approves any.
//
// Otherwise it tells the chosen one, which asks again as a steal; a steal
// heads the line, so the chosen one is next whoever waits before it. This
// term then ends with ErrStolen, as for any steal, and YieldTo returns
// true (as it does when the term ends for any other reason meanwhile);
// the lead function must return, as when its ctx ends, and the lock
// passes once it has (never two leaders at once). If the chosen one's
// process is gone first, or ctx ends, the hand-over is withdrawn and
// YieldTo returns false, still leading; give ctx a bound (a chosen
// Elector cancelled while it waits leaves YieldTo to ctx). A hand-over
// withdrawn in the instant the chosen one acts on it may still let it
// steal: this term, or, if this term ended in that instant, the next.
//
// The waiters between the head of the line and the chosen one keep their
// tickets and their order: they are passed once, and lead after the
// chosen one, in FIFO order, as does everyone behind it; with Requeue this
// Elector queues again at the tail. It needs the flock backend (*Locker)
// and, to be told, a waiter on Linux (inotify); elsewhere it returns an
// error matching ErrUnsupported.
func (e *Elector) YieldTo(ctx context.Context, choose func(Pending) bool) (bool, error) {
	lk, ok := e.Backend.(*Locker)
	if !ok {
		return false, fmt.Errorf("%w: YieldTo needs the flock backend (*elect.Locker)", ErrUnsupported)
	}
	lead := e.Leadership()
	if lead == nil || lead.Err() != nil {
		return false, nil
	}
	updates, err := lk.Watch(ctx, e.Name)
	if err != nil {
		return false, err
	}
	snap, ok := <-updates
	if !ok {
		return false, ctx.Err()
	}
	id, pid := chooseHandoff(snap, choose)
	if id == "" || e.Leadership() != lead {
		return false, nil
	}
	q, err := lk.queueDir(e.Name)
	if err != nil {
		return false, err
	}
	defer q.Close()
	if err := writeHandoff(q, lead.Epoch(), id); err != nil {
		return false, err
	}
	h := handover{q: q, lead: lead, id: id, pid: pid}
	return h.await(ctx, updates)
}

// chooseHandoff is the first waiting request, in the order of the line,
// that accepts hand-overs, runs, and that choose approves: its hand-over
// id and pid; "" when there is none.
func chooseHandoff(snap Snapshot, choose func(Pending) bool) (id string, pid int) {
	for _, p := range snap.Pending {
		hid, ok := handoffID(p.Labels)
		if ok && p.State != "stopped" && (choose == nil || choose(p)) {
			return hid, p.PID
		}
	}
	return "", 0
}

// A handover is a hand-over under way: the chosen waiter (id, pid) is
// named in q's hand-over file for lead's epoch.
type handover struct {
	q    *oslock.Dir
	lead *Leadership
	id   string
	pid  int
}

// await waits until the term ends (the hand-over done: true), or ctx
// ends or the chosen one is gone for good (withdrawn: false).
func (h handover) await(ctx context.Context, updates <-chan Snapshot) (bool, error) {
	for {
		select {
		case <-h.lead.Context().Done():
			return true, nil
		case <-ctx.Done():
			h.withdraw()
			return false, ctx.Err()
		case snap, ok := <-updates:
			if !ok {
				h.withdraw()
				return false, ctx.Err()
			}
			if h.chosenGone(snap) {
				select {
				case <-h.lead.Context().Done():
					return true, nil
				default:
				}
				h.withdraw()
				return false, nil
			}
		}
	}
}

// chosenGone reports whether the chosen waiter is gone for good: in no
// request (between its two it is in neither) and its process gone.
func (h handover) chosenGone(snap Snapshot) bool {
	inLine := slices.ContainsFunc(snap.Pending, func(p Pending) bool { hid, _ := handoffID(p.Labels); return hid == h.id })
	return !inLine && oslock.StateOf(h.pid) == oslock.ProcGone
}

// withdraw removes the hand-over file if it still names this hand-over.
func (h handover) withdraw() {
	if cur, ok := readHandoff(h.q); ok && cur.id == h.id && cur.epoch == h.lead.Epoch() {
		h.q.Remove(handoffFile)
	}
}

// queueDir opens name's queue directory; the caller closes it.
func (l *Locker) queueDir(name string) (*oslock.Dir, error) {
	d, err := l.current()
	if err != nil {
		return nil, err
	}
	return d.Sub(name+queueSuffix, true, oslock.DirOptions{GroupShared: l.group})
}

type handoff struct {
	epoch uint64
	id    string
}

func writeHandoff(q *oslock.Dir, epoch uint64, id string) error {
	var b [8]byte
	rand.Read(b[:])
	tmp := tmpPrefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
	f, err := q.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "Y %d %s\n", epoch, id)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = q.Rename(tmp, handoffFile)
	}
	if err != nil {
		q.Remove(tmp)
	}
	return err
}

func readHandoff(q *oslock.Dir) (handoff, bool) {
	f, err := q.OpenFile(handoffFile, os.O_RDONLY, 0)
	if err != nil {
		return handoff{}, false
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 256))
	fields := strings.Fields(string(bytes.TrimSpace(b)))
	if len(fields) != 3 || fields[0] != "Y" {
		return handoff{}, false
	}
	epoch, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		return handoff{}, false
	}
	return handoff{epoch, fields[2]}, true
}

// acceptsHandoff reports whether this Elector's requests can be handed
// the lock out of turn.
func (e *Elector) acceptsHandoff() (*Locker, bool) {
	lk, ok := e.Backend.(*Locker)
	r := e.Request
	return lk, ok && e.AcceptHandoff && r.Mode == Exclusive && !r.Steal && !r.IfAvailable
}

// acquireOrHandoff is Acquire for an Elector that accepts hand-overs: it
// queues with its hand-over id among its labels and, if the leader names
// it meanwhile (YieldTo), asks again as a steal.
func (e *Elector) acquireOrHandoff(ctx context.Context, lk *Locker) (*Leadership, error) {
	var b [16]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	req := e.Request
	req.Labels = append(slices.Clone(req.Labels), handoffLabel+id)
	q, err := lk.queueDir(e.Name)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	wctx, stopWatch := context.WithCancel(ctx)
	// Armed before the request is queued: no leader can name it sooner.
	named, watched := lk.watchNamed(wctx, q, e.Name, id)
	type acquired struct {
		l   *Leadership
		err error
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan acquired, 1)
	go func() {
		l, err := lk.Acquire(actx, e.Name, req)
		got <- acquired{l, err}
	}()
	select {
	case a := <-got:
		stopWatch()
		<-watched
		return a.l, a.err
	case <-named:
	}
	<-watched
	stopWatch()
	cancel()
	if a := <-got; a.err == nil {
		return a.l, nil // granted as it was named
	}
	req.Steal = true
	l, err := lk.Acquire(ctx, e.Name, req)
	if h, ok := readHandoff(q); ok && h.id == id {
		q.Remove(handoffFile)
	}
	return l, err
}

// watchNamed watches q's hand-over file until it names id in a term
// that holds name (named closes) or ctx ends; watched closes once the
// watch is over. Without inotify, nothing is ever named: the request
// queues as any does.
func (l *Locker) watchNamed(ctx context.Context, q *oslock.Dir, name, id string) (named, watched chan struct{}) {
	named, watched = make(chan struct{}), make(chan struct{})
	w, err := oslock.WatchChild(filepath.Join(l.Dir(), name+queueSuffix), handoffFile)
	if err != nil {
		close(watched)
		return named, watched
	}
	go func() {
		defer close(watched)
		defer w.Stop()
		for {
			if h, ok := readHandoff(q); ok && h.id == id && l.holdsEpoch(ctx, name, h.epoch) {
				close(named)
				return
			}
			select {
			case <-w.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return named, watched
}

// holdsEpoch reports whether name is held in the term epoch.
func (l *Locker) holdsEpoch(ctx context.Context, name string, epoch uint64) bool {
	snap, err := l.Query(ctx, name)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(snap.Held, func(h Holder) bool { return h.Epoch == epoch })
}
