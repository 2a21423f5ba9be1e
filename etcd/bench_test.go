package etcd

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/leaderrun/leaderrun/elect"
)

// Benchmarks beside etcd's own recipes, in the same run against the same
// server, so that ratios survive a noisy machine:
//
//	go test -run '^$' -bench . -benchtime 200x ./ (in etcd/)

// contender is one side of a handover: a Locker or a concurrency recipe.
type contender struct {
	lock   func(ctx context.Context) error
	unlock func(ctx context.Context) error
}

func ours(tb testing.TB, l *Locker, name string, req elect.Request) contender {
	var lead *elect.Leadership
	return contender{
		lock: func(ctx context.Context) (err error) {
			lead, err = l.Acquire(ctx, name, req)
			return err
		},
		unlock: func(context.Context) error { return lead.Release() },
	}
}

func election(tb testing.TB, cli *clientv3.Client, pfx string) contender {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	e := concurrency.NewElection(s, pfx)
	return contender{
		lock:   func(ctx context.Context) error { return e.Campaign(ctx, "x") },
		unlock: func(ctx context.Context) error { return e.Resign(ctx) },
	}
}

func mutex(tb testing.TB, cli *clientv3.Client, pfx string) contender {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	m := concurrency.NewMutex(s, pfx)
	return contender{lock: m.Lock, unlock: m.Unlock}
}

// BenchmarkHandover: two contenders (two sessions, as two hosts would be)
// take turns, each holding for holdFor; one op is one term. p50-ns is the
// time from the release call to the next grant: the handover.
func BenchmarkHandover(b *testing.B) {
	c := sharedCluster(b)
	cli := c.Client(b)
	b.Run("leaderrun", func(b *testing.B) {
		pfx := testPrefix(b)
		x, y := open(b, c, pfx, Config{TTL: 10 * time.Second}), open(b, c, pfx, Config{TTL: 10 * time.Second})
		handover(b, ours(b, x, "h", elect.Request{}), ours(b, y, "h", elect.Request{}))
	})
	b.Run("concurrency.Election", func(b *testing.B) {
		pfx := testPrefix(b)
		handover(b, election(b, cli, pfx), election(b, cli, pfx))
	})
	b.Run("concurrency.Mutex", func(b *testing.B) {
		pfx := testPrefix(b)
		handover(b, mutex(b, cli, pfx), mutex(b, cli, pfx))
	})
}

// holdFor is how long a holder holds in BenchmarkHandover.
const holdFor = 3 * time.Millisecond

func handover(b *testing.B, cs ...contender) {
	ctx := b.Context()
	t0 := time.Now()
	var n, releasedAt atomic.Int64
	var mu sync.Mutex
	samples := make([]time.Duration, 0, b.N)
	var wg sync.WaitGroup
	b.ResetTimer()
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if err := c.lock(ctx); err != nil {
					b.Error(err)
					return
				}
				if r := releasedAt.Load(); r != 0 {
					d := time.Since(t0) - time.Duration(r)
					mu.Lock()
					samples = append(samples, d)
					mu.Unlock()
				}
				last := n.Add(1) >= int64(b.N)
				// Hold a moment, so that the other side is queued and
				// waiting when we release: what is measured is the
				// handover, not the other's joining.
				time.Sleep(holdFor)
				releasedAt.Store(int64(time.Since(t0)))
				if last {
					releasedAt.Store(0)
					// Let the other side's pending lock through, then
					// stop it: n is past b.N.
					n.Add(1 << 40)
				}
				if err := c.unlock(ctx); err != nil {
					b.Error(err)
					return
				}
				if n.Load() > int64(b.N) {
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	reportP50(b, samples)
}

func reportP50(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(samples[len(samples)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkAcquireRelease: one contender alone takes and gives back the
// lock; one op is both, in round trips to etcd.
func BenchmarkAcquireRelease(b *testing.B) {
	c := sharedCluster(b)
	cli := c.Client(b)
	run := func(b *testing.B, ct contender) {
		ctx := b.Context()
		for b.Loop() {
			if err := ct.lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := ct.unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("leaderrun", func(b *testing.B) {
		run(b, ours(b, open(b, c, testPrefix(b), Config{TTL: 10 * time.Second}), "ar", elect.Request{}))
	})
	b.Run("leaderrun-ifavailable", func(b *testing.B) {
		run(b, ours(b, open(b, c, testPrefix(b), Config{TTL: 10 * time.Second}), "ar", elect.Request{IfAvailable: true}))
	})
	b.Run("concurrency.Election", func(b *testing.B) { run(b, election(b, cli, testPrefix(b))) })
	b.Run("concurrency.Mutex", func(b *testing.B) { run(b, mutex(b, cli, testPrefix(b))) })
}

// BenchmarkCrashFailover: the holder's host dies (its lease is no longer
// renewed and nothing is deleted); one op is the time until the waiter is
// granted, with a 2s TTL on both sides. Bounded below by the TTL and the
// server's expiry sweep; run with -benchtime 3x.
func BenchmarkCrashFailover(b *testing.B) {
	c := sharedCluster(b)
	cli := c.Client(b)
	const ttl = 2 * time.Second
	b.Run("leaderrun", func(b *testing.B) {
		var samples []time.Duration
		for range b.N {
			b.StopTimer()
			pfx := testPrefix(b)
			x, y := open(b, c, pfx, Config{TTL: ttl}), open(b, c, pfx, Config{TTL: ttl})
			h, err := x.Acquire(b.Context(), "cf", elect.Request{})
			if err != nil {
				b.Fatal(err)
			}
			w := async(b.Context(), y, "cf", elect.Request{})
			for s, _ := y.Query(b.Context(), "cf"); len(s.Pending) == 0; s, _ = y.Query(b.Context(), "cf") {
				time.Sleep(time.Millisecond)
			}
			s, _ := x.session(b.Context())
			b.StartTimer()
			t := time.Now()
			s.end(elect.ErrSessionLost, false) // no renewal, no revoke: a dead host
			r := <-w
			samples = append(samples, time.Since(t))
			b.StopTimer()
			if r.err != nil {
				b.Fatal(r.err)
			}
			r.lead.Release()
			h.Release()
		}
		reportP50(b, samples)
	})
	b.Run("concurrency.Election", func(b *testing.B) {
		var samples []time.Duration
		for range b.N {
			b.StopTimer()
			pfx := testPrefix(b)
			s1, err := concurrency.NewSession(cli, concurrency.WithTTL(int(ttl/time.Second)))
			if err != nil {
				b.Fatal(err)
			}
			s2, err := concurrency.NewSession(cli, concurrency.WithTTL(int(ttl/time.Second)))
			if err != nil {
				b.Fatal(err)
			}
			e1, e2 := concurrency.NewElection(s1, pfx), concurrency.NewElection(s2, pfx)
			if err := e1.Campaign(b.Context(), "1"); err != nil {
				b.Fatal(err)
			}
			won := make(chan error, 1)
			go func() { won <- e2.Campaign(b.Context(), "2") }()
			waitKeys(b, cli, pfx, 2)
			b.StartTimer()
			t := time.Now()
			s1.Orphan() // no renewal, no revoke: a dead host
			err = <-won
			samples = append(samples, time.Since(t))
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			s2.Close()
		}
		reportP50(b, samples)
	})
}
