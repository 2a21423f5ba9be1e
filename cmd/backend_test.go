package cmd

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/leaderrun/leaderrun/elect"
)

// TestWithBackend checks that every command opens the lock directory
// through the Opener given to New, with the flags' settings.
func TestWithBackend(t *testing.T) {
	errOpen := errors.New("backend refused")
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--name", "x", "--", "true"},
		{"status"},
		{"who", "x"},
		{"publish", "x", "hello"},
		{"subscribe", "x"},
		{"lockfile", "x"},
	} {
		var got []elect.Config
		app := New(WithBackend(func(c elect.Config) (Backend, error) {
			got = append(got, c)
			return nil, errOpen
		}))
		err := app.run(context.Background(), append([]string{"leaderrun", "--dir", dir, "--group-shared"}, args...))
		if !errors.Is(err, errOpen) {
			t.Errorf("%v: err = %v, want the backend's", args, err)
		}
		if len(got) == 0 || got[0].Dir != dir || !got[0].GroupShared {
			t.Errorf("%v: opened with %+v, want Dir %s and GroupShared", args, got, dir)
		}
	}
}

// sessionLosing is elect's Locker whose first lost requests fail with
// elect.ErrSessionLost, as an etcd waiter's do when a quorum is lost.
type sessionLosing struct {
	*elect.Locker
	lose     int
	acquired int
}

func (b *sessionLosing) Acquire(ctx context.Context, name string, r elect.Request) (*elect.Leadership, error) {
	b.acquired++
	if b.lose > 0 {
		b.lose--
		return nil, fmt.Errorf("%w: lease gone", elect.ErrSessionLost)
	}
	return b.Locker.Acquire(ctx, name, r)
}

// TestRequeueLostSession: a waiting request whose session was lost queues
// again, and COMMAND runs once it is granted; with -n it is not retried.
func TestRequeueLostSession(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		code  int
		tries int
	}{
		{nil, 0, 3},
		{[]string{"-n"}, ExitLockLost, 1},
	} {
		dir := t.TempDir()
		b := &sessionLosing{lose: 2}
		app := New(WithBackend(func(c elect.Config) (Backend, error) {
			lk, err := elect.Open(c)
			if err != nil {
				return nil, err
			}
			b.Locker = lk
			return b, nil
		}))
		args := append(append([]string{"leaderrun", "--dir", dir}, tc.flags...), "--name", "x", "--", "true")
		err := app.run(context.Background(), args)
		if code := ExitCode(err); code != tc.code || b.acquired != tc.tries {
			t.Errorf("%v: exit %d after %d requests (%v), want %d after %d", tc.flags, code, b.acquired, err, tc.code, tc.tries)
		}
	}
}
