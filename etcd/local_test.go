//go:build linux

package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
)

// TestDeadLocalWaiter: a waiter of this kernel that dies while queued (a
// helper process, SIGKILLed) is passed by the waiter behind it at once,
// not after its lease's TTL (60 s here, beyond the test's 20 s bound): the
// lock goes from the holder to the live waiter, never to the dead one.
func TestDeadLocalWaiter(t *testing.T) {
	c := sharedCluster(t)
	pfx := testPrefix(t)
	holder := open(t, c, pfx, Config{TTL: 60 * time.Second, Host: "a"})
	h, err := holder.Acquire(context.Background(), "job", elect.Request{})
	if err != nil {
		t.Fatal(err)
	}
	dead := spawnHolder(t, c.Endpoints(), pfx, "job", 60*time.Second)
	defer dead.kill()
	queuedN(t, holder, "job", 1)
	behind := open(t, c, pfx, Config{TTL: 60 * time.Second, Host: "b"})
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		l, err := behind.Acquire(ctx, "job", elect.Request{})
		if err == nil {
			l.Release()
		}
		got <- err
	}()
	queuedN(t, holder, "job", 2)
	dead.kill()
	if s := queuedN(t, holder, "job", 1); s.Pending[0].Host != "b" {
		// The dead waiter's key was deleted by the one behind it.
		t.Fatalf("after the SIGKILL the queue is %+v, want only b", s.Pending)
	}
	h.Release()
	if err := <-got; err != nil {
		t.Fatalf("the waiter behind the dead one: %v", err)
	}
}
