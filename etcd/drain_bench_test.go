package etcd

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/etcd/internal/etcdtest"
)

// BenchmarkDrain: N waiters queue for one name behind a holder, then the
// queue drains, each taking the lock and releasing it at once: N
// hand-offs. It reports what the cluster sent per hand-off, from the
// member's own counters (etcd_debugging_mvcc_events_total: watch events;
// grpc_server_msg_sent_total of Watch: watch messages;
// etcd_network_client_grpc_sent_bytes_total: every byte to clients,
// renewals included), for a Locker and for concurrency.Mutex, in the same
// run on the same one-member cluster:
//
//	go test -run '^$' -bench Drain -benchtime 1x ./ (in etcd/)
func BenchmarkDrain(b *testing.B) {
	c := etcdtest.StartT(b, 1)
	for _, n := range []int{10, 200, 1000} {
		if testing.Short() && n > 200 {
			continue
		}
		b.Run(fmt.Sprintf("N=%d/leaderrun", n), func(b *testing.B) { drain(b, c, n, false) })
		b.Run(fmt.Sprintf("N=%d/mutex", n), func(b *testing.B) { drain(b, c, n, true) })
	}
}

// memberCounters reads the counters BenchmarkDrain reports.
func memberCounters(tb testing.TB, m *etcdtest.Member) (events, msgs, bytes float64) {
	tb.Helper()
	resp, err := http.Get(m.ClientURL + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		v, _ := strconv.ParseFloat(line[i+1:], 64)
		switch {
		case strings.HasPrefix(line, "etcd_debugging_mvcc_events_total "):
			events = v
		case strings.HasPrefix(line, "grpc_server_msg_sent_total{") && strings.Contains(line, `grpc_method="Watch",grpc_service="etcdserverpb.Watch"`):
			msgs = v
		case strings.HasPrefix(line, "etcd_network_client_grpc_sent_bytes_total "):
			bytes = v
		}
	}
	return events, msgs, bytes
}

func drain(b *testing.B, c *etcdtest.Cluster, n int, peer bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		pfx := fmt.Sprintf("/drain/%s-%d/", strings.ReplaceAll(b.Name(), "/", "_"), i)
		const clients = 8
		var clis []*clientv3.Client
		for range clients {
			clis = append(clis, c.Client(b))
		}
		type waiter struct {
			lock, unlock func() error
		}
		ws := make([]waiter, n+1)
		var lockers []*Locker
		for j := range ws {
			cli := clis[j%clients]
			if peer {
				s, err := concurrency.NewSession(cli, concurrency.WithTTL(60))
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				m := concurrency.NewMutex(s, pfx+"m")
				ws[j] = waiter{func() error { return m.Lock(ctx) }, func() error { return m.Unlock(ctx) }}
				continue
			}
			if j < clients {
				l, err := Open(Config{Client: cli, Prefix: pfx, TTL: 60 * time.Second})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				lockers = append(lockers, l)
			}
			l := lockers[j%clients]
			var lead *elect.Leadership
			ws[j] = waiter{func() (err error) {
				lead, err = l.Acquire(ctx, "job", elect.Request{})
				return err
			}, func() error { return lead.Release() }}
		}
		if err := ws[0].lock(); err != nil {
			b.Fatal(err)
		}
		done := make(chan error, n)
		for j := 1; j <= n; j++ {
			go func(w waiter) {
				err := w.lock()
				if err == nil {
					err = w.unlock()
				}
				done <- err
			}(ws[j])
		}
		// Wait until every waiter is in line (its key is there and its
		// watch has had time to start).
		for {
			r, err := clis[0].Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				b.Fatal(err)
			}
			if r.Count >= int64(n+1) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Second)
		e0, m0, by0 := memberCounters(b, c.Members[0])
		start := time.Now()
		b.StartTimer()
		if err := ws[0].unlock(); err != nil {
			b.Fatal(err)
		}
		for range n {
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		took := time.Since(start)
		e1, m1, by1 := memberCounters(b, c.Members[0])
		b.ReportMetric((e1-e0)/float64(n), "events/handoff")
		b.ReportMetric((m1-m0)/float64(n), "watchmsgs/handoff")
		b.ReportMetric((by1-by0)/float64(n), "B/handoff")
		b.ReportMetric(float64(took.Microseconds())/float64(n), "us/handoff")
		for _, l := range lockers {
			l.Close()
		}
	}
}
