package bus

import (
	"context"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	lrbus "github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/etcd"
)

// BenchmarkBus measures the bus over a single-member etcd on loopback
// beside a plain etcd Put seen by a Watch, in the same run against the
// same server, so that the ratio survives a noisy machine:
//
//	go test -run '^$' -bench Bus -benchtime 300x ./ (in etcd/)
//
// latency: one member publishes, another receives (publish→receive), and
// a client puts a key that a watch reports (put→watch); interleaved, one
// of each per op. throughput: the leader queues b.N messages at once
// (Server.Publish, as --fanout does) until a member has received the
// last, beside b.N sequential Puts seen by a watch.
func BenchmarkBus(b *testing.B) {
	c := sharedCluster(b)
	cli := c.Client(b)
	ctx := context.Background()
	pfx := testPrefix(b)
	a := open(b, c, pfx, etcd.Config{})
	lead, err := a.Acquire(ctx, "job", elect.Request{})
	if err != nil {
		b.Fatal(err)
	}
	srv, _ := serveBus(b, a, lead, WithQueue(1<<20, 1<<30))
	pub := dial(b, open(b, c, pfx, etcd.Config{}), "job", DialOptions{PublishOnly: true})
	sub := dial(b, open(b, c, pfx, etcd.Config{}), "job", DialOptions{EventBuffer: 1 << 20})
	if ev := nextEvent(b, sub, "first"); ev.Kind != lrbus.EventLeader {
		b.Fatalf("first event %v", ev.Kind)
	}
	plain := pfx + "plain"
	wctx, cancel := context.WithCancel(ctx)
	b.Cleanup(cancel)
	wch := cli.Watch(wctx, plain, clientv3.WithCreatedNotify())
	<-wch
	data := make([]byte, 100)
	receive := func(b *testing.B) lrbus.Event {
		ev := <-sub.Events()
		if ev.Kind != lrbus.EventMessage || ev.Gap {
			b.Fatalf("got %v gap %v", ev.Kind, ev.Gap)
		}
		return ev
	}
	watched := func(b *testing.B, n int) {
		for n > 0 {
			wr := <-wch
			if wr.Err() != nil {
				b.Fatal(wr.Err())
			}
			n -= len(wr.Events)
		}
	}

	b.Run("latency", func(b *testing.B) {
		busD := make([]time.Duration, 0, b.N)
		putD := make([]time.Duration, 0, b.N)
		retD := make([]time.Duration, 0, b.N)
		for b.Loop() {
			t0 := time.Now()
			if _, err := cli.Put(ctx, plain, string(data)); err != nil {
				b.Fatal(err)
			}
			watched(b, 1)
			putD = append(putD, time.Since(t0))

			t0 = time.Now()
			if err := pub.Publish(ctx, data); err != nil {
				b.Fatal(err)
			}
			retD = append(retD, time.Since(t0))
			receive(b)
			busD = append(busD, time.Since(t0))
		}
		p := func(d []time.Duration, q float64) float64 {
			slices.Sort(d)
			return float64(d[int(float64(len(d)-1)*q)].Nanoseconds())
		}
		b.ReportMetric(p(busD, .5), "bus-p50-ns")
		b.ReportMetric(p(busD, .99), "bus-p99-ns")
		b.ReportMetric(p(retD, .5), "publish-return-p50-ns")
		b.ReportMetric(p(putD, .5), "put-watch-p50-ns")
		b.ReportMetric(p(putD, .99), "put-watch-p99-ns")
		b.ReportMetric(p(busD, .5)/p(putD, .5), "bus/put-p50")
	})

	b.Run("throughput", func(b *testing.B) {
		n := b.N
		t0 := time.Now()
		for range n {
			if _, err := srv.Publish(data); err != nil {
				b.Fatal(err)
			}
		}
		queued := time.Since(t0)
		for range n {
			receive(b)
		}
		busT := time.Since(t0)
		t0 = time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range n {
				if _, err := cli.Put(ctx, plain, string(data)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
		watched(b, n)
		<-done
		putT := time.Since(t0)
		b.ReportMetric(float64(n)/busT.Seconds(), "bus-msgs/s")
		b.ReportMetric(float64(n)/putT.Seconds(), "put-watch-msgs/s")
		b.ReportMetric(float64(queued.Nanoseconds())/float64(n), "publish-call-ns")
		b.ReportMetric(putT.Seconds()/busT.Seconds(), "bus/put-rate")
	})
}
