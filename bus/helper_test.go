package bus

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/proctest"
)

// role makes a role of run: roles read commands from stdin, one a line,
// and report on stdout, one a line; they exit when stdin closes, or after
// a minute.
func role(name string, run func(context.Context) error) func() int {
	return func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := run(ctx); err != nil {
			fmt.Fprintln(os.Stderr, name+":", err)
			return 1
		}
		return 0
	}
}

type out struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (o *out) say(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.w, format+"\n", args...)
	o.w.Flush()
}

// roleLeader waits in line for the lock, serves the bus, says "leading
// EPOCH", and publishes on "publish N" (in bursts of 50, then "published").
func roleLeader(ctx context.Context) error {
	o := &out{w: bufio.NewWriter(os.Stdout)}
	l, err := elect.Open(elect.Config{Dir: os.Getenv("BUS_DIR")})
	if err != nil {
		return err
	}
	defer l.Close()
	lead, err := l.Acquire(ctx, testName, elect.Request{})
	if err != nil {
		return err
	}
	defer lead.Release()
	q, _ := strconv.Atoi(os.Getenv("BUS_QUEUE"))
	if q == 0 {
		q = defaultQueueLen
	}
	pid := os.Getpid()
	s, err := Listen(lead, QueueLength(q), WithHandler(func(ctx context.Context, r Request) ([]byte, error) {
		if string(r.Data) == "block" {
			o.say("blocking")
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return fmt.Appendf(nil, "pid:%d:%s", pid, r.Data), nil
	}))
	if err != nil {
		return err
	}
	go s.Serve(ctx)
	defer s.Close()
	o.say("leading %d", lead.Epoch())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "publish" {
			n, _ := strconv.Atoi(f[1])
			for i := range n {
				if _, err := s.Publish(fmt.Appendf(nil, "L%d-%d", pid, i)); err != nil {
					return err
				}
				if i%50 == 49 {
					time.Sleep(time.Millisecond)
				}
			}
			o.say("published")
		}
	}
	return nil
}

// roleMember dials (waiting for a leader) and reports leader changes as
// "leader EPOCH PID GAP" and "lost ERR". It keeps a digest of each term's
// messages rather than printing them, so that its output never holds it
// back. Commands: "publish N"; "request DATA" (answers "reply DATA" or
// "reqerr ERR"); "await N [EPOCH]" (answers "have EPOCH COUNT DIGEST"
// once the current term, or the one given, has N messages).
func roleMember(ctx context.Context) error {
	o := &out{w: bufio.NewWriter(os.Stdout)}
	// A deep buffer: on a loaded machine this role must not cut itself
	// off as a slow consumer (TestClientSideSlowConsumer covers that).
	c, err := Dial(ctx, os.Getenv("BUS_DIR"), testName, WaitForLeader(), EventBuffer(1<<16))
	if err != nil {
		return err
	}
	defer c.Close()
	d := &termDigest{changed: make(chan struct{}), digest: sha256.New()}
	go func() {
		for ev := range c.Events() {
			switch ev.Kind {
			case EventLeader:
				o.say("leader %d %d %v", ev.Leader.Epoch, ev.Leader.PID, ev.Gap)
			case EventMessage:
				d.add(o, ev.Message)
			case EventLost:
				o.say("lost %v", ev.Err)
			}
		}
	}()
	pid := os.Getpid()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "publish":
			n, _ := strconv.Atoi(f[1])
			for i := range n {
				if err := c.Publish(ctx, fmt.Appendf(nil, "M%d-%d", pid, i)); err != nil {
					return err
				}
			}
			o.say("published")
		case "request":
			go func() {
				r, err := c.Request(ctx, []byte(f[1]))
				if err != nil {
					o.say("reqerr %v", err)
					return
				}
				o.say("reply %s", r)
			}()
		case "await":
			n, _ := strconv.Atoi(f[1])
			var want uint64
			if len(f) > 2 {
				want, _ = strconv.ParseUint(f[2], 10, 64)
			}
			go d.await(ctx, o, n, want)
		}
	}
	return nil
}

// termDigest is a member's count and digest of the current term's
// messages.
type termDigest struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at each message
	epoch   uint64
	count   int
	lastSeq uint64
	digest  hash.Hash
}

// add counts m, starting over at a new epoch, and says "bad sequence" if
// its number does not grow.
func (d *termDigest) add(o *out, m Message) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if m.Epoch != d.epoch {
		d.epoch, d.count, d.lastSeq = m.Epoch, 0, 0
		d.digest.Reset()
	}
	if m.Seq <= d.lastSeq {
		o.say("bad sequence %d after %d", m.Seq, d.lastSeq)
	}
	d.lastSeq = m.Seq
	d.count++
	fmt.Fprintf(d.digest, "%d %d %s\n", m.Seq, m.PID, m.Data)
	close(d.changed)
	d.changed = make(chan struct{})
}

// await says "have EPOCH COUNT DIGEST" once the current term (or term
// want, if not 0) has n messages, or returns at ctx's end.
func (d *termDigest) await(ctx context.Context, o *out, n int, want uint64) {
	for {
		d.mu.Lock()
		e, k, ch := d.epoch, d.count, d.changed
		var sum []byte
		if k >= n && (want == 0 || e == want) {
			sum = d.digest.Sum(nil)
		}
		d.mu.Unlock()
		if sum != nil {
			o.say("have %d %d %x", e, k, sum[:8])
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// roleRawDial connects to the socket in BUS_SOCK without any check of its
// own and reports what the leader said: "refused TEXT" or "hello".
func roleRawDial(ctx context.Context) error {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", os.Getenv("BUS_SOCK"))
	if err != nil {
		return err
	}
	uc := nc.(*net.UnixConn)
	defer uc.Close()
	uc.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = handshake(uc, newFrameReader(uc, 1<<20), clientHello{version: protoVersion, pid: uint32(os.Getpid())})
	switch {
	case errors.Is(err, ErrRefused):
		fmt.Printf("refused %v\n", err)
	case err != nil:
		return err
	default:
		fmt.Println("hello")
	}
	return nil
}

// startRole starts the test binary as role; at the end of the test it is
// given 5s to exit after its stdin closes.
func startRole(t *testing.T, name, role string, env []string) *proctest.Proc {
	t.Helper()
	return proctest.Start(t, name, proctest.Command(role, env...), proctest.Options{Grace: 5 * time.Second})
}

// send writes line to p's stdin, failing the test if p cannot take it.
func send(t *testing.T, p *proctest.Proc, line string) {
	t.Helper()
	if err := p.Send(line); err != nil {
		t.Fatalf("%s: %v", p.Name, err)
	}
}
