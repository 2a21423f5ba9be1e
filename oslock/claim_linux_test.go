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
	c, err := TakeClaim(ctx, key, me)
	if c == nil || err != nil {
		t.Fatalf("TakeClaim of a free key: %v, %v", c, err)
	}
	// A second holder waits for the first: here until its context ends.
	sctx, scancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if c2, err := TakeClaim(sctx, key, me); c2 != nil || err == nil {
		t.Fatalf("a second claim of the same key was taken: %v, %v", c2, err)
	}
	scancel()
	// Another user's claim is not ours: not waited for, and not taken.
	if held, err := WaitClaim(ctx, key, func(int) bool { return false }); held || err != nil {
		t.Fatalf("claim of a refused uid: held %v, err %v", held, err)
	}
	if c2, err := TakeClaim(ctx, key, func(int) bool { return false }); c2 != nil || err != nil {
		t.Fatalf("TakeClaim of a key squatted by a refused uid: %v, %v", c2, err)
	}
	taken := make(chan *Claim, 1)
	go func() {
		c2, _ := TakeClaim(ctx, key, me)
		taken <- c2
	}()
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
	// The waiting TakeClaim has it now.
	select {
	case c = <-taken:
		if c == nil {
			t.Fatal("the waiting TakeClaim got no claim once the first closed")
		}
	case <-ctx.Done():
		t.Fatal("the waiting TakeClaim did not return after the claim was closed")
	}
	defer c.Close()
	// A cancelled wait returns at once.
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if _, err := WaitClaim(cctx, key, me); err == nil {
		t.Fatal("cancelled WaitClaim returned no error")
	}
}
