package cmd

// Temporary stand-in for elect.Open until elect's bodies land: a polling
// flock on DIR/NAME.lock, no queue, no steal. Deleted with that commit.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/oslock"
)

type stubLocker struct{ d *oslock.Dir }

func defaultDir() string {
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		return x + "/leaderrun"
	}
	return fmt.Sprintf("/tmp/leaderrun-%d", os.Getuid())
}

func openLocker(dir string) (locker, error) {
	create := dir == ""
	if create {
		dir = defaultDir()
	}
	d, err := oslock.OpenDir(dir, oslock.DirOptions{Create: create})
	if err != nil {
		return nil, err
	}
	return &stubLocker{d: d}, nil
}

func (s *stubLocker) Dir() string  { return s.d.Path() }
func (s *stubLocker) Close() error { return s.d.Close() }

func (s *stubLocker) Acquire(ctx context.Context, name string, r elect.Request) (*elect.Leadership, error) {
	if err := elect.ValidateName(name); err != nil {
		return nil, err
	}
	f, err := s.d.OpenFile(name+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		ok, err := oslock.TryLock(f, r.Mode == elect.Exclusive)
		if err != nil {
			f.Close()
			return nil, err
		}
		if ok {
			break
		}
		if r.IfAvailable {
			f.Close()
			return nil, elect.ErrBusy
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	l, _ := elect.NewLeadership(elect.Term{Name: name, Dir: s.d.Path(), Mode: r.Mode,
		Epoch: uint64(time.Now().UnixNano()), Since: time.Now(), Release: f.Close})
	return l, nil
}

func (s *stubLocker) Query(ctx context.Context, name string) (elect.Snapshot, error) {
	snap, err := s.QueryAll(ctx)
	var out elect.Snapshot
	for _, h := range snap.Held {
		if h.Name == name {
			out.Held = append(out.Held, h)
		}
	}
	return out, err
}

func (s *stubLocker) QueryAll(ctx context.Context) (elect.Snapshot, error) {
	snap := elect.Snapshot{Held: []elect.Holder{}, Pending: []elect.Pending{}}
	names, err := s.d.Names()
	if err != nil {
		return snap, err
	}
	table, err := oslock.LockTable()
	if err != nil {
		return snap, err
	}
	for _, n := range names {
		name, ok := strings.CutSuffix(n, ".lock")
		if !ok {
			continue
		}
		id, _, err := s.d.Lstat(n)
		if err != nil {
			continue
		}
		for _, h := range table[id] {
			mode := elect.Shared
			if h.Exclusive {
				mode = elect.Exclusive
			}
			snap.Held = append(snap.Held, elect.Holder{Name: name, Mode: mode, PID: h.PID,
				Command: oslock.Cmdline(h.PID), State: oslock.StateOf(h.PID).String()})
		}
	}
	return snap, nil
}
