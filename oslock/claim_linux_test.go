package oslock

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

func TestClaim(t *testing.T) {
	key := fmt.Sprintf("leaderrun-test/%d/%d", os.Getpid(), time.Now().UnixNano())
	me := func(uid int) bool { return uid == os.Geteuid() }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if held, err := WaitClaim(ctx, key, me); held || err != nil {
		t.Fatalf("unclaimed key: held %v, err %v", held, err)
	}
	c := MakeClaim(key)
	if c == nil {
		t.Fatal("MakeClaim failed")
	}
	if MakeClaim(key) != nil {
		t.Fatal("a second claim of the same key was made")
	}
	// Another user's claim is not ours.
	if held, err := WaitClaim(ctx, key, func(int) bool { return false }); held || err != nil {
		t.Fatalf("claim of a refused uid: held %v, err %v", held, err)
	}
	done := make(chan error, 1)
	go func() {
		held, err := WaitClaim(ctx, key, me)
		if !held && err == nil {
			err = fmt.Errorf("did not wait")
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("WaitClaim returned while the claim was held: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	c.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("WaitClaim did not return after the claim was closed")
	}
	// A cancelled wait returns at once.
	c = MakeClaim(key)
	defer c.Close()
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if _, err := WaitClaim(cctx, key, me); err == nil {
		t.Fatal("cancelled WaitClaim returned no error")
	}
}
