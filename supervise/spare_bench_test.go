package supervise

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// BenchmarkStart: from the grant to COMMAND's exit, for COMMAND forked at
// Start in a term's cgroup made then (fork), and exec'd by a spare made
// beforehand in its cgroup (spare); COMMAND is /bin/true. The time a
// spare takes to run is not counted: a waiter pays it while it waits.
// go test -run '^$' -bench Start -benchtime 200x ./supervise
func BenchmarkStart(b *testing.B) {
	argv := []string{"/bin/true"}
	b.Run("fork", func(b *testing.B) {
		for b.Loop() {
			cg := newTermCgroup(newTermID())
			var prepare []func(*exec.Cmd)
			if cg != nil {
				prepare = append(prepare, cg.prepare)
			}
			ch, err := startChild(argv, os.Environ(), os.Stdout, prepare...)
			if err != nil {
				b.Fatal(err)
			}
			<-ch.Done()
			if cg != nil {
				b.StopTimer()
				cg.remove(b.Context())
				b.StartTimer()
			}
		}
	})
	b.Run("fork-cgroup-ahead", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			cg := newTermCgroup(newTermID())
			var prepare []func(*exec.Cmd)
			if cg != nil {
				prepare = append(prepare, cg.prepare)
			}
			b.StartTimer()
			ch, err := startChild(argv, os.Environ(), os.Stdout, prepare...)
			if err != nil {
				b.Fatal(err)
			}
			<-ch.Done()
			if cg != nil {
				b.StopTimer()
				cg.remove(b.Context())
				b.StartTimer()
			}
		}
	})
	b.Run("spare", func(b *testing.B) {
		var total time.Duration
		for range b.N {
			s, err := NewSpare(argv, os.Environ(), os.Stdout)
			if err != nil {
				b.Fatal(err)
			}
			for !s.usable() {
				time.Sleep(100 * time.Microsecond)
			}
			s.taken = true
			t0 := time.Now()
			ch, err := (*Term)(nil).startSpare(s, argv, os.Environ(), os.Stdout)
			if err != nil {
				b.Fatal(err)
			}
			<-ch.Done()
			total += time.Since(t0)
			if s.cg != nil {
				s.cg.remove(b.Context())
			}
		}
		b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/op")
	})
}
