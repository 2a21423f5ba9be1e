package bus

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/proctest"
)

// BenchmarkRelearn measures how soon a member learns of a new leader after
// the old one is SIGKILLed, beside the lock's own handover in the same
// run. Two "leader" processes (helper_test.go) queue for the name; the
// benchmark's own member is dialled in; each iteration kills the leading
// process and times, from the kill, (a) the new leader's "leading EPOCH"
// line reaching us (the lock handed over, plus a pipe), and (b) the
// member's EventLeader for that epoch. It reports their medians and the
// ratio; the target is a re-learn within a few ms of the handover.
//
//	go test -run '^$' -bench Relearn -benchtime 40x ./bus
func BenchmarkRelearn(b *testing.B) {
	dir := b.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := func() *proctest.Proc {
		return proctest.Start(b, "leader", proctest.Command("leader", "BUS_DIR="+dir), proctest.Options{Stderr: os.Stderr})
	}
	l, err := elect.Open(elect.Config{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	queued := func(n int) {
		deadline := time.Now().Add(proctest.Wait)
		for {
			s, err := l.Query(ctx, testName)
			if err == nil && len(s.Held)+len(s.Pending) >= n {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("the queue did not reach %d: %+v %v", n, s, err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	cur := start()
	epoch := epochIn(b, cur.Expect("leading "))
	next := start()
	queued(2)
	c, err := Dial(ctx, dir, testName, WaitForLeader())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var lostAt time.Time
	leaderIs := func(e uint64) time.Time {
		for {
			select {
			case ev, ok := <-c.Events():
				if !ok {
					b.Fatal("member closed")
				}
				if ev.Kind == EventLost {
					lostAt = time.Now()
				}
				if ev.Kind == EventLeader && ev.Leader.Epoch >= e {
					return time.Now()
				}
			case <-ctx.Done():
				b.Fatalf("no EventLeader for epoch %d", e)
			}
		}
	}
	leaderIs(epoch)
	var handover, relearn, lost []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		cur.Signal(syscall.SIGKILL)
		line, ok := next.Next(proctest.Wait)
		if !ok || !strings.HasPrefix(line, "leading ") {
			b.Fatalf("the next leader said %q", line)
		}
		t1 := time.Now()
		epoch = epochIn(b, line)
		t2 := leaderIs(epoch)
		handover = append(handover, t1.Sub(t0))
		relearn = append(relearn, t2.Sub(t0))
		lost = append(lost, lostAt.Sub(t0))
		b.StopTimer()
		cur.Kill()
		cur, next = next, start()
		queued(2)
		b.StartTimer()
	}
	b.StopTimer()
	h, r := median(handover), median(relearn)
	b.ReportMetric(float64(h.Microseconds())/1000, "handover-p50-ms")
	b.ReportMetric(float64(r.Microseconds())/1000, "relearn-p50-ms")
	b.ReportMetric(float64(median(lost).Microseconds())/1000, "lost-p50-ms")
	b.ReportMetric(float64(r)/float64(h), "relearn/handover")
	b.ReportMetric(0, "ns/op")
}

func epochIn(tb testing.TB, line string) uint64 {
	e, err := strconv.ParseUint(strings.TrimPrefix(line, "leading "), 10, 64)
	if err != nil {
		tb.Fatalf("bad leader line %q", line)
	}
	return e
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
