package pg

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/elect"
)

// BenchmarkHandover measures, on one server on loopback, the time from a
// holder's release to the grant of the waiter in line behind it, which
// is of another session (another Locker), trial by trial interleaved
// with the peer:
//
//   - leaderrun-pg: Leadership.Release (one round trip: the leave call,
//     which grants the next in line and tells it so with the NOTIFY),
//     and the waiter holds on that notification.
//   - advisory-lock: pg_advisory_unlock on one connection while another
//     is blocked in pg_advisory_lock of the same key: the server wakes the
//     waiter itself, the bare floor of any hand-over through PostgreSQL.
//
// Reported: p50 of each (µs) and their ratio, and the waiter's round
// trips between the release and its grant (its session connection's
// statements): 0 when the release hands it the grant, 1 when it must
// evaluate on the NOTIFY. An uncontended grant is one (enqueue).
func BenchmarkHandover(b *testing.B) {
	srv := sharedServer(b)
	schema := testSchema(b)
	x, y := open(b, srv, schema, Config{TTL: 30 * time.Second}), open(b, srv, schema, Config{TTL: 30 * time.Second})
	ctx := context.Background()
	ca, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer ca.Close(ctx)
	cb, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer cb.Close(ctx)
	var lr, adv []time.Duration
	var trips int64
	holder, waiter := x, y
	lead, err := holder.Acquire(ctx, "ho", elect.Request{})
	if err != nil {
		b.Fatal(err)
	}
	ah, aw := ca, cb
	if _, err := ah.Exec(ctx, "SELECT pg_advisory_lock(4242)"); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		// leaderrun-pg
		g := acquireAsync(ctx, waiter, "ho", elect.Request{})
		waitQueued(b, holder, "ho", 1)
		rt0 := waiter.roundTrips.Load()
		t0 := time.Now()
		lead.Release()
		r := recvGrant(b, g)
		if r.err != nil {
			b.Fatal(r.err)
		}
		lr = append(lr, r.at.Sub(t0))
		trips += waiter.roundTrips.Load() - rt0
		lead = r.lead
		holder, waiter = waiter, holder

		// advisory-lock
		done := make(chan time.Time, 1)
		go func() {
			aw.Exec(ctx, "SELECT pg_advisory_lock(4242)")
			done <- time.Now()
		}()
		for {
			var n int
			ah.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted").Scan(&n)
			if n == 1 {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		t1 := time.Now()
		if _, err := ah.Exec(ctx, "SELECT pg_advisory_unlock(4242)"); err != nil {
			b.Fatal(err)
		}
		adv = append(adv, (<-done).Sub(t1))
		ah, aw = aw, ah
	}
	lead.Release()
	p50 := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Microseconds())
	}
	l, a := p50(lr), p50(adv)
	b.ReportMetric(l, "leaderrun-pg-p50-µs")
	b.ReportMetric(a, "advisory-lock-p50-µs")
	b.ReportMetric(l/a, "ratio")
	b.ReportMetric(float64(trips)/float64(len(lr)), "waiter-round-trips/hand-over")
}

// BenchmarkManyNames: one Locker (one session) acquires 1000 names, one
// grant per op (ns/op is a grant: one round trip, enqueue); then the
// load it puts on the server while it holds 1000 names is measured as the
// session's round trips per second over 5 s: its renewals alone, one per
// (TTL-margin)/3 whatever the number of names, since the lease is the
// session's, not the name's. (The server's pg_stat_database counts are
// flushed late, so they would show the grants' commits here.)
//
// The server's CPU time (every process of it, from /proc, 10 ms ticks)
// over a 5 s window before the Locker connects and over the 5 s window
// holding 1000 names is reported per second too.
func BenchmarkManyNames(b *testing.B) {
	srv := sharedServer(b)
	schema := testSchema(b)
	l := open(b, srv, schema, Config{TTL: 6 * time.Second})
	ctx := context.Background()
	cpu0 := srv.CPU()
	time.Sleep(5 * time.Second)
	idle := float64((srv.CPU() - cpu0).Milliseconds()) / 5 // reported after b.Loop, which resets metrics
	var leads []*elect.Leadership
	i := 0
	for b.Loop() {
		lead, err := l.Acquire(ctx, "n"+strconv.Itoa(i), elect.Request{})
		if err != nil {
			b.Fatal(err)
		}
		leads = append(leads, lead)
		i++
	}
	b.StopTimer()
	for len(leads) < 1000 {
		lead, err := l.Acquire(ctx, "n"+strconv.Itoa(len(leads)), elect.Request{})
		if err != nil {
			b.Fatal(err)
		}
		leads = append(leads, lead)
	}
	before, cpu1 := l.roundTrips.Load(), srv.CPU()
	time.Sleep(5 * time.Second)
	b.ReportMetric(float64(l.roundTrips.Load()-before)/5, "round-trips/s-holding-1000")
	b.ReportMetric(float64((srv.CPU()-cpu1).Milliseconds())/5, "server-cpu-ms/s-holding-1000")
	b.ReportMetric(idle, "server-cpu-ms/s-idle")
	for _, lead := range leads {
		lead.Release()
	}
}

// BenchmarkWaiters: one name, a holder and N waiters (4 from 4 Lockers,
// 200 from 20: each Locker is a session of its own, as a process is),
// handed on from each to the next until all have led, once per op. Per
// hand-off: release → next granted (p50), the notifications every Locker
// received, and the server's CPU time (all its processes, from /proc).
// None of them may grow with N: a release wakes the next in line alone.
func BenchmarkWaiters(b *testing.B) {
	srv := sharedServer(b)
	for _, tc := range []struct{ waiters, lockers int }{{4, 4}, {200, 20}} {
		b.Run(strconv.Itoa(tc.waiters), func(b *testing.B) {
			schema := testSchema(b)
			ctx := context.Background()
			h := open(b, srv, schema, Config{})
			ls := []*Locker{h}
			for range tc.lockers {
				ls = append(ls, open(b, srv, schema, Config{}))
			}
			notified := func() (n int64) {
				for _, l := range ls {
					if l.lis != nil {
						n += l.lis.received.Load()
					}
				}
				return n
			}
			var gaps []time.Duration
			var notes int64
			var cpu time.Duration
			for b.Loop() {
				lead, err := h.Acquire(ctx, "w", elect.Request{})
				if err != nil {
					b.Fatal(err)
				}
				grants := make(chan grant, tc.waiters)
				for i := range tc.waiters {
					go func() {
						lead, err := ls[1+i%tc.lockers].Acquire(ctx, "w", elect.Request{})
						grants <- grant{lead, time.Now(), err}
					}()
				}
				waitQueued(b, h, "w", tc.waiters)
				n0, c0 := notified(), srv.CPU()
				for range tc.waiters {
					t0 := time.Now()
					lead.Release()
					g := recvGrant(b, grants)
					if g.err != nil {
						b.Fatal(g.err)
					}
					gaps = append(gaps, g.at.Sub(t0))
					lead = g.lead
				}
				lead.Release()
				notes += notified() - n0
				cpu += srv.CPU() - c0
			}
			slices.Sort(gaps)
			n := float64(len(gaps))
			b.ReportMetric(float64(gaps[len(gaps)/2].Microseconds()), "handoff-p50-µs")
			b.ReportMetric(float64(notes)/n, "notifications/handoff")
			b.ReportMetric(float64(cpu.Microseconds())/n, "server-cpu-µs/handoff")
		})
	}
}

// BenchmarkEndSession measures a watchdog's end of a dead holder's term
// at the library's level: a holder and its waiter (two Lockers), and a
// third Locker's SessionEnd for the holder's session, opened and warmed
// ahead (PrepareEndSession). The holder's connection is first ended
// (pg_terminate_backend, as when its process dies: the waiter's watch of
// it fires) in dead=true, left alone in dead=false. Reported: the end's
// round trip (end-ms) and the time from the start to the waiter's grant
// (grant-ms), p50 of each.
func BenchmarkEndSession(b *testing.B) {
	for _, dead := range []bool{false, true} {
		b.Run("dead="+strconv.FormatBool(dead), func(b *testing.B) {
			srv := sharedServer(b)
			schema := testSchema(b)
			ctx := context.Background()
			su := srv.Super(b)
			var ends, grants []time.Duration
			for i := 0; b.Loop(); i++ {
				cfg := Config{TTL: 20 * time.Second}
				h, w, e := open(b, srv, schema, cfg), open(b, srv, schema, cfg), open(b, srv, schema, cfg)
				name := "es" + strconv.Itoa(i)
				lh, err := h.Acquire(ctx, name, elect.Request{})
				if err != nil {
					b.Fatal(err)
				}
				g := acquireAsync(ctx, w, name, elect.Request{})
				waitQueued(b, h, name, 1)
				sid, _ := h.Session(lh)
				se := e.PrepareEndSession(sid)
				<-se.ready
				time.Sleep(20 * time.Millisecond) // the waiter's warm-up done
				t0 := time.Now()
				if dead {
					h.mu.Lock()
					pid := h.sess.conn.PgConn().PID()
					h.mu.Unlock()
					su.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
				}
				t1 := time.Now()
				if err := se.End(ctx); err != nil {
					b.Fatal(err)
				}
				ends = append(ends, time.Since(t1))
				r := recvGrant(b, g)
				if r.err != nil {
					b.Fatal(r.err)
				}
				grants = append(grants, r.at.Sub(t0))
				r.lead.Release()
				se.Close()
				for _, l := range []*Locker{h, w, e} {
					l.Close()
				}
			}
			ms := func(ds []time.Duration) float64 {
				slices.Sort(ds)
				return float64(ds[len(ds)/2].Microseconds()) / 1000
			}
			b.ReportMetric(ms(ends), "end-ms")
			b.ReportMetric(ms(grants), "grant-ms")
		})
	}
}
