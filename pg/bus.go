package pg

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
)

// The bus of a name runs over LISTEN/NOTIFY on one channel per name. Its
// exclusive holder serves it (ListenBus): it announces itself when it
// starts and when a member says hello, sequences what members publish,
// and notifies each message with its term's epoch and a sequence number
// counting from 1, in a statement that notifies only while the term's
// request row exists, so nothing published to a term that has ended is
// sent. PostgreSQL delivers the notifications of one channel in commit
// order, and one connection commits all of a term's messages, so members
// get them in order. A leader that dies without a word is seen leaving
// by the members' Watch of the name (the end of its connection, then of
// its lease).
//
// A notification carries at most 8000 bytes: a message's data is
// base64 in a JSON payload, so MaxBusMessage is the largest data; larger
// ones get bus.ErrTooLarge. The bus is for control traffic: every message
// is a commit on the server, delivered to every listener of the name.

// MaxBusMessage is the largest message the bus over PostgreSQL carries.
const MaxBusMessage = 5000

// busMsg is one notification on a name's bus channel.
type busMsg struct {
	K      string `json:"k"`           // hello, leader, lost, msg, pub
	Epoch  uint64 `json:"e,omitempty"` // the term
	Seq    uint64 `json:"s,omitempty"`
	PID    int    `json:"p,omitempty"`  // the publisher
	LPID   int    `json:"lp,omitempty"` // the leader
	Host   string `json:"h,omitempty"`  // the leader's host
	Since  int64  `json:"t,omitempty"`  // the term's start, µs
	ID     string `json:"i,omitempty"`  // a member's publication, echoed by its msg
	Data   []byte `json:"d,omitempty"`
	Reason string `json:"r,omitempty"`
}

func (l *Locker) busChan(name string) string {
	sum := md5.Sum([]byte(l.schema + "/" + name))
	return "lrb_" + hex.EncodeToString(sum[:])
}

// listenOn opens a connection that LISTENs on channel ch: the spare
// watch connection if there is one (keepSpare: a leader granted as the
// holder's connection went has one, and its term's start then costs the
// server no backend's start), renamed for what, else a new one.
func (l *Locker) listenOn(ctx context.Context, what, ch string) (*pgx.Conn, error) {
	listen := "LISTEN " + pgx.Identifier{ch}.Sanitize()
	if c := l.takeSpare(); c != nil {
		name := l.appName(what)
		if n := l.cc.RuntimeParams["application_name"]; n != "" {
			name = n // the connection string's
		}
		name, err := c.PgConn().EscapeString(name)
		if err == nil {
			_, err = c.Exec(ctx, "SET application_name = '"+name+"'; "+listen)
		}
		if err == nil {
			return c, nil
		}
		c.Close(context.Background())
	}
	c, err := l.connect(ctx, what, map[string]string{"statement_timeout": "10000"})
	if err != nil {
		return nil, err
	}
	if _, err := c.Exec(ctx, listen); err != nil {
		c.Close(context.Background())
		return nil, l.pgErr("LISTEN", err)
	}
	return c, nil
}

// notifications reads c's notifications into a channel until ctx ends or
// c fails; the channel is then closed.
func notifications(ctx context.Context, c *pgx.Conn) <-chan busMsg {
	out := make(chan busMsg, 64)
	go func() {
		defer close(out)
		defer c.Close(context.Background())
		for {
			n, err := c.WaitForNotification(ctx)
			if err != nil {
				return
			}
			var m busMsg
			if json.Unmarshal([]byte(n.Payload), &m) != nil {
				continue
			}
			select {
			case out <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// BusServer is the leader's side of a name's bus.
type BusServer struct {
	l    *Locker
	t    *holding
	lead *elect.Leadership
	ch   string

	mu     sync.Mutex // held by each send: one at a time, in order
	closed bool
	seq    uint64
	seen   map[string]uint64 // members' publications, by id: a repeat is not sequenced twice
	ids    []string          // seen's ids, oldest first, at most seenMax
}

// seenMax is how many of its members' latest publications a leader
// remembers, so that a copy sent again (BusClient.Publish) is answered
// with the message it was, not sequenced twice: a term's memory of them is
// bounded, and a copy comes at most seconds after its first.
const seenMax = 1 << 16

// ListenBus serves the bus of lead's name for as long as the term lasts;
// only an exclusive term of this Locker serves one. Serve must run for
// members' publications to be sequenced.
func (l *Locker) ListenBus(lead *elect.Leadership) (*BusServer, error) {
	l.mu.Lock()
	t := l.terms[lead]
	l.mu.Unlock()
	if t == nil || lead.Err() != nil {
		return nil, fmt.Errorf("pg: the leadership of %s is not a live term of this Locker", lead.Name())
	}
	if lead.Mode() != elect.Exclusive {
		return nil, fmt.Errorf("pg: only an exclusive leadership serves a bus, not a %v one", lead.Mode())
	}
	// The publishing connection is opened by the first message, not
	// here: the term's COMMAND starts without waiting for it.
	return &BusServer{l: l, t: t, lead: lead, ch: l.busChan(lead.Name()), seen: map[string]uint64{}}, nil
}

func (s *BusServer) leaderMsg(k string) busMsg {
	return busMsg{K: k, Epoch: s.lead.Epoch(), LPID: os.Getpid(), Host: s.l.host, Since: s.lead.Since().UnixMicro()}
}

// Publish sends data to every member as the leader's own message and
// returns its sequence number once the server has committed it.
func (s *BusServer) Publish(data []byte) (uint64, error) {
	return s.publish(data, os.Getpid(), "")
}

func (s *BusServer) publish(data []byte, pid int, id string) (uint64, error) {
	if len(data) > MaxBusMessage {
		return 0, fmt.Errorf("%w: %d bytes, the bus over PostgreSQL carries at most %d (a NOTIFY payload is 8000 bytes)", bus.ErrTooLarge, len(data), MaxBusMessage)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq, ok := s.seen[id]; ok && id != "" {
		return seq, s.send(busMsg{K: "msg", Epoch: s.lead.Epoch(), Seq: seq, PID: pid, ID: id, LPID: os.Getpid(), Host: s.l.host, Since: s.lead.Since().UnixMicro(), Data: data})
	}
	m := s.leaderMsg("msg")
	m.Seq, m.PID, m.ID, m.Data = s.seq+1, pid, id, data
	if err := s.send(m); err != nil {
		return 0, err
	}
	s.seq++
	if id != "" {
		s.remember(id, s.seq)
	}
	return s.seq, nil
}

// remember notes that the member's publication id was sequenced as seq,
// forgetting the oldest beyond seenMax; s.mu is held.
func (s *BusServer) remember(id string, seq uint64) {
	if len(s.ids) == seenMax {
		delete(s.seen, s.ids[0])
		s.ids = s.ids[1:]
	}
	s.seen[id] = seq
	s.ids = append(s.ids, id)
}

// send notifies m while the term's row exists; s.mu is held.
func (s *BusServer) send(m busMsg) error {
	if s.lead.Err() != nil {
		return bus.ErrLeaderGone
	}
	p, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if s.closed {
		return bus.ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// On the Locker's connection for reads, open already (Ping, Query):
	// a connection of the bus's own would cost the server a backend's
	// start as the term begins and its exit as the holder dies, the two
	// moments of a failover (BenchmarkCLIFailover).
	var tag pgconn.CommandTag
	err = s.l.withAdmin(ctx, func(c *pgx.Conn) error {
		var err error
		tag, err = c.Exec(ctx, "SELECT pg_notify($1, $2) FROM "+s.l.q+".requests WHERE ticket = $3 AND session_id = $4 AND epoch = $5",
			s.ch, string(p), s.t.ticket, s.t.s.id, int64(s.lead.Epoch()))
		return err
	})
	if err != nil {
		return s.l.pgErr("publishing", err)
	}
	if tag.RowsAffected() == 0 {
		return bus.ErrLeaderGone
	}
	return nil
}

// testDropPub, set by tests, makes Serve drop a member's publication as a
// lost notification or a failed statement would, when it returns true.
var testDropPub func(id string) bool

// Serve sequences members' publications and answers their hellos until
// ctx ends or the term does; it then tells the members the term is over.
func (s *BusServer) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.lead.Context(), cancel)
	defer stop()
	c, err := s.l.listenOn(ctx, "bus", s.ch)
	if err != nil {
		s.close("")
		return err
	}
	in := notifications(ctx, c)
	s.mu.Lock()
	s.send(s.leaderMsg("leader"))
	s.mu.Unlock()
	for m := range in {
		switch m.K {
		case "hello":
			s.mu.Lock()
			s.send(s.leaderMsg("leader"))
			s.mu.Unlock()
		case "pub":
			if m.Epoch == s.lead.Epoch() && (testDropPub == nil || !testDropPub(m.ID)) {
				s.publish(m.Data, m.PID, m.ID)
			}
		}
	}
	reason := "the leader stepped down"
	if err := s.lead.Err(); err != nil {
		reason = err.Error()
	}
	s.close(reason)
	return nil
}

// close tells the members the term's bus is over.
func (s *BusServer) close(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	m := s.leaderMsg("lost")
	m.Reason = reason
	p, _ := json.Marshal(m)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// On the connection the messages went on, open since Serve said
	// "leader": the term's release waits for this.
	s.l.withAdmin(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SELECT pg_notify($1, $2)", s.ch, string(p))
		return err
	})
}

// BusDial are a member's choices.
type BusDial struct {
	// WaitForLeader makes DialBus wait for a leader rather than fail with
	// bus.ErrNoLeader.
	WaitForLeader bool
	// PublishOnly: the member only publishes and gets no messages.
	PublishOnly bool
}

// BusClient is a member of a name's bus.
type BusClient struct {
	l    *Locker
	name string
	ch   string
	o    BusDial
	out  chan bus.Event

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	cur     *bus.Leader
	gone    uint64 // the last term seen to end: nothing of it or before is taken up again
	serving bool   // cur's server sent a message: its last ones are waited for
	// listening: cur's server announced itself ("leader", which Serve
	// sends once it LISTENs), so a publication is heard. A "msg" alone
	// does not say so: the leader's own Publish notifies before (or
	// without) Serve, and a member's publication sent then was lost,
	// its Publish waiting for an answer that never came.
	listening bool
	last      uint64
	changed   chan struct{} // closed, and replaced, when cur, serving or listening changes
	pending   map[string]chan error
}

// DialBus makes a member of name's bus. Its first event is EventLeader
// for the leader now; it fails with bus.ErrNoLeader when nobody leads,
// unless o.WaitForLeader, and then waits until a leader is granted or ctx
// ends. ctx bounds only DialBus; the client lives until Close or the
// Locker's Close.
func (l *Locker) DialBus(ctx context.Context, name string, o BusDial) (*BusClient, error) {
	if err := elect.ValidateName(name); err != nil {
		return nil, err
	}
	c := &BusClient{l: l, name: name, ch: l.busChan(name), o: o, out: make(chan bus.Event, 256), done: make(chan struct{}),
		changed: make(chan struct{}), pending: map[string]chan error{}}
	c.ctx, c.cancel = context.WithCancel(l.closing)
	// One connection LISTENs on the bus channel and the name's watch.
	in := make(chan busMsg, 64)
	snaps, err := l.watchAlso(c.ctx, name, c.ch, in)
	if err != nil {
		c.cancel()
		return nil, err
	}
	first := <-snaps
	if h := exclusiveHolder(first); h != nil {
		c.lead(leaderOf(name, *h))
	} else if !o.WaitForLeader {
		c.cancel()
		return nil, bus.ErrNoLeader
	}
	c.mu.Lock()
	ch, none := c.changed, c.cur == nil
	c.mu.Unlock()
	go c.run(in, snaps)
	c.hello()
	if none {
		select {
		case <-ch:
		case <-ctx.Done():
			c.Close()
			return nil, context.Cause(ctx)
		}
	}
	return c, nil
}

func exclusiveHolder(s elect.Snapshot) *elect.Holder {
	for i, h := range s.Held {
		if h.Mode == elect.Exclusive {
			return &s.Held[i]
		}
	}
	return nil
}

func leaderOf(name string, h elect.Holder) bus.Leader {
	return bus.Leader{Name: name, PID: h.PID, Epoch: h.Epoch, Since: h.Since, Mode: elect.Exclusive, Host: h.Host}
}

// hello asks the leader, if it serves, to announce itself.
func (c *BusClient) hello() {
	p, _ := json.Marshal(busMsg{K: "hello"})
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	c.l.withAdmin(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "SELECT pg_notify($1, $2)", c.ch, string(p))
		return err
	})
}

func (c *BusClient) emit(ev bus.Event) {
	if c.o.PublishOnly {
		select {
		case c.out <- ev:
		default: // a publisher need not read its events
		}
		return
	}
	select {
	case c.out <- ev:
	case <-c.ctx.Done():
	}
}

// lead makes l the current leader; c.mu is not held.
func (c *BusClient) lead(l bus.Leader) {
	c.mu.Lock()
	if (c.cur != nil && c.cur.Epoch >= l.Epoch) || l.Epoch <= c.gone {
		c.mu.Unlock()
		return
	}
	old := c.cur
	c.cur, c.serving, c.listening, c.last = &l, false, false, 0
	if old != nil {
		c.gone = max(c.gone, old.Epoch)
	}
	c.bump()
	c.mu.Unlock()
	if old != nil {
		c.failPending(bus.ErrLeaderChanged)
		c.emit(bus.Event{Kind: bus.EventLost, Leader: *old, Err: bus.ErrLeaderGone})
	}
	c.emit(bus.Event{Kind: bus.EventLeader, Leader: l})
}

// lost ends the current leader's term if it is epoch (0: any).
func (c *BusClient) lost(epoch uint64) {
	c.mu.Lock()
	old := c.cur
	if old == nil || (epoch != 0 && old.Epoch != epoch) {
		c.mu.Unlock()
		return
	}
	c.cur, c.serving, c.listening, c.gone = nil, false, false, max(c.gone, old.Epoch)
	c.bump()
	c.mu.Unlock()
	c.failPending(bus.ErrLeaderChanged)
	c.emit(bus.Event{Kind: bus.EventLost, Leader: *old, Err: bus.ErrLeaderGone})
}

func (c *BusClient) bump() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *BusClient) failPending(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, ch := range c.pending {
		ch <- err
		delete(c.pending, id)
	}
}

func msgLeader(name string, m busMsg) bus.Leader {
	return bus.Leader{Name: name, PID: m.LPID, Epoch: m.Epoch, Since: time.UnixMicro(m.Since), Mode: elect.Exclusive, Host: m.Host}
}

func (c *BusClient) run(in <-chan busMsg, snaps <-chan elect.Snapshot) {
	defer close(c.done)
	defer close(c.out)
	// The watch of the name and the bus channel come on two connections:
	// when the watch sees the serving leader gone first, its last
	// messages and its "lost" may still be on their way. They are waited
	// for, a second at most (a leader that died sends none).
	var linger <-chan time.Time
	var lingerFor uint64
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-linger:
			linger = nil
			c.lost(lingerFor)
		case s, ok := <-snaps:
			if !ok {
				c.lost(0)
				return
			}
			if h := exclusiveHolder(s); h != nil {
				c.lead(leaderOf(c.name, *h))
				continue
			}
			c.mu.Lock()
			cur, serving := c.cur, c.serving
			c.mu.Unlock()
			switch {
			case cur == nil:
			case serving && linger == nil:
				linger, lingerFor = time.After(time.Second), cur.Epoch
			case !serving:
				c.lost(cur.Epoch)
			}
		case m, ok := <-in:
			if !ok {
				c.lost(0)
				return
			}
			c.handle(m)
		}
	}
}

func (c *BusClient) handle(m busMsg) {
	switch m.K {
	case "leader", "msg":
		c.lead(msgLeader(c.name, m))
		c.mu.Lock()
		if c.cur == nil || c.cur.Epoch != m.Epoch {
			c.mu.Unlock()
			return // an ended term's
		}
		if !c.serving {
			c.serving = true
			c.bump()
		}
		if m.K == "leader" {
			if !c.listening {
				c.listening = true
				c.bump()
			}
			c.mu.Unlock()
			return
		}
		if ch, ok := c.pending[m.ID]; ok && m.ID != "" {
			ch <- nil
			delete(c.pending, m.ID)
		}
		gap := m.Seq != c.last+1
		if m.Seq > c.last {
			c.last = m.Seq
		} else {
			c.mu.Unlock()
			return // a repeat
		}
		c.mu.Unlock()
		if !c.o.PublishOnly {
			c.emit(bus.Event{Kind: bus.EventMessage, Message: bus.Message{Epoch: m.Epoch, Seq: m.Seq, PID: m.PID, Data: m.Data}, Gap: gap})
		}
	case "lost":
		c.lost(m.Epoch)
	}
}

// Events delivers the member's events in order; it is closed by Close.
func (c *BusClient) Events() <-chan bus.Event { return c.out }

// Publish sends data to the leader, which sequences it for every member,
// and returns once it has. It fails with bus.ErrNoLeader when nobody
// serves the bus, with bus.ErrLeaderChanged when the leader changed before
// answering, and with bus.ErrTooLarge above MaxBusMessage. A publication
// the leader has not answered within a second is sent again (the leader
// sequences it once), so a lost one costs a delay, not a wait until ctx
// ends.
func (c *BusClient) Publish(ctx context.Context, data []byte) error {
	if len(data) > MaxBusMessage {
		return fmt.Errorf("%w: %d bytes, the bus over PostgreSQL carries at most %d (a NOTIFY payload is 8000 bytes)", bus.ErrTooLarge, len(data), MaxBusMessage)
	}
	// A leader that holds but has not answered yet: wait a little for
	// its announcement, never for ever.
	wait := time.NewTimer(2 * time.Second)
	defer wait.Stop()
	for {
		c.mu.Lock()
		cur, listening, changed := c.cur, c.listening, c.changed
		c.mu.Unlock()
		if cur != nil && listening {
			break
		}
		select {
		case <-changed:
		case <-wait.C:
			return bus.ErrNoLeader
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-c.ctx.Done():
			return bus.ErrClosed
		}
	}
	var b [12]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	ack := make(chan error, 1)
	c.mu.Lock()
	epoch := c.cur.Epoch
	c.pending[id] = ack
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	p, _ := json.Marshal(busMsg{K: "pub", Epoch: epoch, PID: os.Getpid(), ID: id, Data: data})
	if len(p) > 7999 {
		return fmt.Errorf("%w: %d bytes encoded", bus.ErrTooLarge, len(p))
	}
	send := func() error {
		return c.l.withAdmin(ctx, func(conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, "SELECT pg_notify($1, $2)", c.ch, string(p))
			return err
		})
	}
	if err := send(); err != nil {
		return err
	}
	// A publication the leader did not sequence (its statement failed,
	// its listening connection was being made anew) is answered by
	// nobody: it is sent again, the same id, until it is. The leader
	// sequences an id once and answers every copy with that one message;
	// a new leader fails the wait (ErrLeaderChanged).
	again := time.NewTimer(publishResend)
	defer again.Stop()
	for wait := publishResend; ; {
		select {
		case err := <-ack:
			return err
		case <-again.C:
			if err := send(); err != nil {
				return err
			}
			wait = min(2*wait, publishResendMax)
			again.Reset(wait)
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-c.ctx.Done():
			return bus.ErrClosed
		}
	}
}

// publishResend is how long a member's Publish waits for the leader's
// answer before it sends its publication again; the wait doubles up to
// publishResendMax.
const (
	publishResend    = time.Second
	publishResendMax = 8 * time.Second
)

// Close leaves the bus; Events is closed.
func (c *BusClient) Close() error {
	c.cancel()
	<-c.done
	return nil
}
