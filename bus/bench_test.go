package bus

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

// The benchmarks compare the bus with the plainest fan-out over Unix
// sockets, in the same run: one writer that writes every 64-byte message
// to each of K connections, and K readers that read length-prefixed frames
// straight off their sockets. The bus does more per message (sequencing,
// a queue per member, its framing, a channel to the application), and
// must stay within 2x of the plain socket in latency and throughput.
//
//	go test -run '^$' -bench . -benchtime 2s -count 5 ./bus | tee bench.txt
//	benchstat bench.txt

const benchMsg = 64

// fanout is what a benchmark needs from either implementation: publish a
// message, and have every reader's deliveries reported to deliver.
type fanout interface {
	publish(b []byte)
	close()
}

// plain is the comparison: the simplest correct fan-out.
type plain struct {
	ln    *net.UnixListener
	conns []*net.UnixConn
	frame []byte
	wg    sync.WaitGroup
}

func newPlain(b *testing.B, k int, deliver func(reader int, msg []byte)) *plain {
	sock := filepath.Join(b.TempDir(), "plain.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		b.Fatal(err)
	}
	p := &plain{ln: ln, frame: make([]byte, 4+benchMsg)}
	binary.BigEndian.PutUint32(p.frame, benchMsg)
	for i := range k {
		c, err := net.Dial("unix", sock)
		if err != nil {
			b.Fatal(err)
		}
		sc, err := ln.AcceptUnix()
		if err != nil {
			b.Fatal(err)
		}
		p.conns = append(p.conns, sc)
		p.wg.Go(func() {
			defer c.Close()
			r := bufio.NewReader(c)
			buf := make([]byte, 4+benchMsg)
			for {
				if _, err := io.ReadFull(r, buf[:4]); err != nil {
					return
				}
				n := binary.BigEndian.Uint32(buf)
				if _, err := io.ReadFull(r, buf[4:4+n]); err != nil {
					return
				}
				deliver(i, buf[4:4+n])
			}
		})
	}
	return p
}

func (p *plain) publish(msg []byte) {
	copy(p.frame[4:], msg)
	for _, c := range p.conns {
		c.Write(p.frame)
	}
}

func (p *plain) close() {
	for _, c := range p.conns {
		c.Close()
	}
	p.ln.Close()
	p.wg.Wait()
}

// busFan is the bus with K members dialled in this process.
type busFan struct {
	s       *Server
	lead    interface{ Release() error }
	clients []*Client
	served  chan struct{}
	wg      sync.WaitGroup
}

func newBus(b *testing.B, k int, deliver func(reader int, msg []byte)) *busFan {
	dir := b.TempDir()
	lead, _ := newLead(dir, 1)
	s, err := Listen(lead)
	if err != nil {
		b.Fatal(err)
	}
	f := &busFan{s: s, lead: lead, served: make(chan struct{})}
	go func() {
		defer close(f.served)
		s.Serve(context.Background())
	}()
	for i := range k {
		c, err := Dial(context.Background(), dir, testName)
		if err != nil {
			b.Fatal(err)
		}
		f.clients = append(f.clients, c)
		f.wg.Go(func() {
			for ev := range c.Events() {
				if ev.Kind == EventMessage {
					deliver(i, ev.Message.Data)
				}
			}
		})
	}
	proctest.Eventually(b, "every member connected", func() bool { return s.Members() == k })
	return f
}

func (f *busFan) publish(msg []byte) { f.s.Publish(msg) }

func (f *busFan) close() {
	for _, c := range f.clients {
		c.Close()
	}
	f.wg.Wait()
	f.s.Close()
	<-f.served
	f.lead.Release()
}

type maker func(b *testing.B, k int, deliver func(reader int, msg []byte)) fanout

var impls = []struct {
	name string
	make maker
}{
	{"plain", func(b *testing.B, k int, d func(int, []byte)) fanout { return newPlain(b, k, d) }},
	{"bus", func(b *testing.B, k int, d func(int, []byte)) fanout { return newBus(b, k, d) }},
}

// BenchmarkLatency publishes one message at a time and reports the median
// time from publish to delivery over all readers (p50-ns).
func BenchmarkLatency(b *testing.B) {
	for _, k := range []int{1, 10} {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("%s/K=%d", impl.name, k), func(b *testing.B) {
				base := time.Now()
				lat := make([][]time.Duration, k)
				got := make(chan struct{}, k)
				f := impl.make(b, k, func(r int, msg []byte) {
					sent := time.Duration(binary.BigEndian.Uint64(msg))
					lat[r] = append(lat[r], time.Since(base)-sent)
					got <- struct{}{}
				})
				defer f.close()
				msg := make([]byte, benchMsg)
				b.ResetTimer()
				for range b.N {
					binary.BigEndian.PutUint64(msg, uint64(time.Since(base)))
					f.publish(msg)
					for range k {
						<-got
					}
				}
				b.StopTimer()
				all := slices.Concat(lat...)
				slices.Sort(all)
				b.ReportMetric(float64(all[len(all)/2].Nanoseconds()), "p50-ns")
			})
		}
	}
}

// BenchmarkThroughput publishes in windows of 256 messages, waiting for
// every reader to have the window before the next (the bus's leader never
// blocks, so an unpaced burst would only measure its queues), and reports
// deliveries per second.
func BenchmarkThroughput(b *testing.B) {
	const window = 256
	for _, k := range []int{1, 10, 100} {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("%s/K=%d", impl.name, k), func(b *testing.B) {
				got := make(chan struct{}, k)
				f := impl.make(b, k, func(r int, msg []byte) {
					if binary.BigEndian.Uint64(msg)%window == window-1 {
						got <- struct{}{}
					}
				})
				defer f.close()
				msg := make([]byte, benchMsg)
				n := (b.N + window - 1) / window * window
				b.ResetTimer()
				start := time.Now()
				for i := range n {
					binary.BigEndian.PutUint64(msg, uint64(i))
					f.publish(msg)
					if i%window == window-1 {
						for range k {
							<-got
						}
					}
				}
				el := time.Since(start)
				b.StopTimer()
				b.ReportMetric(float64(n*k)/el.Seconds(), "deliveries/s")
			})
		}
	}
}
