package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
)

// TestWithBackend checks that every command opens its Backend through the
// Opener given to New, which reads the backend's flags through FlagValue
// (here from the flag's EnvVar), and returns the Opener's error.
func TestWithBackend(t *testing.T) {
	errOpen := errors.New("backend refused")
	dir := t.TempDir()
	t.Setenv("T_REGION", "eu-1")
	for _, args := range [][]string{
		{"--name", "x", "--", "true"},
		{"status"},
		{"who", "x"},
		{"publish", "x", "hello"},
		{"subscribe", "x"},
		{"lockfile", "x"},
	} {
		var got []string
		app := New(WithBackend(func(v FlagValue) (Backend, error) {
			got = append(got, v("region"))
			return nil, errOpen
		}, BackendFlag{Name: "region", EnvVar: "T_REGION"}))
		err := app.run(context.Background(), append([]string{"leaderrun", "--dir", dir}, args...))
		if !errors.Is(err, errOpen) {
			t.Errorf("%v: err = %v, want the backend's", args, err)
		}
		if len(got) == 0 || got[0] != "eu-1" {
			t.Errorf("%v: opened with region %q, want eu-1", args, got)
		}
	}
}

// remoteBackend is elect's Locker in a directory of its own, seen as a
// backend whose locks are not in the lock directory of this host: no
// LockDir, a Remote.
type remoteBackend struct{ lk *elect.Locker }

func (b remoteBackend) Acquire(ctx context.Context, name string, r elect.Request) (*elect.Leadership, error) {
	return b.lk.Acquire(ctx, name, r)
}
func (b remoteBackend) Query(ctx context.Context, name string) (elect.Snapshot, error) {
	return b.lk.Query(ctx, name)
}
func (b remoteBackend) QueryAll(ctx context.Context) (elect.Snapshot, error) {
	return b.lk.QueryAll(ctx)
}
func (b remoteBackend) Close() error  { return b.lk.Close() }
func (b remoteBackend) Where() string { return "the remote " + b.lk.Dir() }

// TestBackendLocalDir: for a Backend that is no LockDir, the commands
// open the lock directory of --dir (with --group-shared) themselves, and
// give it to COMMAND as LEADERRUN_DIR; messages name the Backend's
// Where; lockfile refuses, since there is no lock file for flock(1).
func TestBackendLocalDir(t *testing.T) {
	remote, local := t.TempDir(), t.TempDir()
	if err := os.Chmod(local, 0o770); err != nil {
		t.Fatal(err)
	}
	open := WithBackend(func(FlagValue) (Backend, error) {
		lk, err := elect.Open(elect.Config{Dir: remote})
		if err != nil {
			return nil, err
		}
		return remoteBackend{lk}, nil
	})
	out := filepath.Join(t.TempDir(), "out")
	err := New(open).run(context.Background(), []string{"leaderrun", "--dir", local, "--group-shared", "--name", "x", "--", "sh", "-c", `echo "$LEADERRUN_DIR" > ` + out})
	if ExitCode(err) != 0 {
		t.Fatalf("run: exit %d: %v", ExitCode(err), err)
	}
	if b, _ := os.ReadFile(out); strings.TrimSpace(string(b)) != local {
		t.Errorf("LEADERRUN_DIR = %q, want the local directory %s", b, local)
	}
	if _, err := os.Stat(filepath.Join(remote, "x.lock")); err != nil {
		t.Errorf("the backend did not elect: %v", err)
	}
	if _, err := os.Stat(filepath.Join(local, "x.lock")); err == nil {
		t.Errorf("x.lock is in the local directory: the flock backend was used")
	}
	// A group-shared directory is refused without --group-shared: the
	// flags reach the local directory's checks.
	err = New(open).run(context.Background(), []string{"leaderrun", "--dir", local, "--name", "x", "--", "true"})
	if ExitCode(err) == 0 {
		t.Errorf("a group-writable --dir without --group-shared was accepted")
	}
	err = New(open).run(context.Background(), []string{"leaderrun", "--dir", local, "--group-shared", "lockfile", "x"})
	if ExitCode(err) != ExitUsage {
		t.Errorf("lockfile over a backend with no lock file: exit %d (%v), want %d", ExitCode(err), err, ExitUsage)
	}
	lk, err := elect.Open(elect.Config{Dir: remote})
	if err != nil {
		t.Fatal(err)
	}
	o, err := openBackend(remoteBackend{lk}, elect.Config{Dir: local, GroupShared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if o.where() != "the remote "+remote || o.Dir() != local {
		t.Errorf("where %q, dir %q; want the backend's Where and %s", o.where(), o.Dir(), local)
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
		app := New(WithBackend(func(FlagValue) (Backend, error) {
			lk, err := elect.Open(elect.Config{Dir: dir})
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

// capableBackend is remoteBackend with the capabilities the commands look
// for, each recording its calls: its bus is the Unix-socket bus of its own
// directory, its grace is fitted, its terms have a token.
type capableBackend struct {
	remoteBackend
	listened, dialed int
	fitted           []time.Duration
	given            []bool
}

func (b *capableBackend) ListenBus(lead *elect.Leadership) (BusServer, error) {
	b.listened++
	return unixBus{dir: b.lk.Dir()}.ListenBus(lead)
}

func (b *capableBackend) DialBus(ctx context.Context, name string, o BusOptions) (BusClient, error) {
	b.dialed++
	return unixBus{dir: b.lk.Dir()}.DialBus(ctx, name, o)
}

func (b *capableBackend) FitGrace(grace time.Duration, given bool) (time.Duration, string, error) {
	b.fitted, b.given = append(b.fitted, grace), append(b.given, given)
	return grace / 2, "halved", nil
}

// TestBackendCapabilities: the commands find a Backend's capabilities on
// the Backend the Opener returned, not on their own wrapper of it (opened):
// the default action fits --grace with FitGrace and serves its own bus
// (BusBackend; with --fanout, which serves it at once), publish dials it.
func TestBackendCapabilities(t *testing.T) {
	remote, local := t.TempDir(), t.TempDir()
	b := &capableBackend{}
	open := WithBackend(func(FlagValue) (Backend, error) {
		lk, err := elect.Open(elect.Config{Dir: remote})
		if err != nil {
			return nil, err
		}
		b.lk = lk
		return b, nil
	})
	err := New(open).run(context.Background(), []string{"leaderrun", "--dir", local, "--name", "x", "--fanout", "--", "true"})
	if ExitCode(err) != 0 {
		t.Fatalf("run: exit %d: %v", ExitCode(err), err)
	}
	if len(b.fitted) != 1 || b.fitted[0] != 5*time.Second || b.given[0] {
		t.Errorf("FitGrace called with %v (given %v), want once with the default 5s, not given", b.fitted, b.given)
	}
	if b.listened != 1 {
		t.Errorf("the leader served the backend's bus %d times, want once", b.listened)
	}
	if _, err := os.Stat(filepath.Join(local, "x.sock")); err == nil {
		t.Errorf("the Unix-socket bus of the local directory was served, not the backend's")
	}
	b.dialed = 0
	err = New(open).run(context.Background(), []string{"leaderrun", "--dir", local, "publish", "x", "hi"})
	if b.dialed == 0 {
		t.Errorf("publish did not dial the backend's bus (%v)", err)
	}
}
