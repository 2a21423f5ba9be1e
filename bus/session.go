package bus

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// session is one connection of a Client to one leader.
type session struct {
	c     *Client
	uc    sockConn
	fr    *frameReader
	hello serverHello
	out   chan []byte   // frames for the writer
	dead  chan struct{} // closed by fail
	done  chan struct{} // closed once the reader has finished

	failOnce sync.Once
	err      error // why the session ended; read after done
	bye      *bye  // the leader's last word, if it said one

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan result
	over    bool // pending has been failed; no more registrations
}

type result struct {
	seq    uint64
	status byte
	data   []byte
	err    error
}

func newSession(c *Client, uc sockConn, fr *frameReader, h serverHello) *session {
	return &session{c: c, uc: uc, fr: fr, hello: h, out: make(chan []byte, 256),
		dead: make(chan struct{}), done: make(chan struct{}), pending: make(map[uint64]chan result)}
}

func (s *session) start() {
	s.c.wg.Add(2)
	go s.writeLoop()
	go s.readLoop()
}

// fail ends the session; the first reason given is kept.
func (s *session) fail(err error) {
	s.failOnce.Do(func() {
		s.err = err
		close(s.dead)
		s.uc.Close()
	})
}

func (s *session) register() (uint64, chan result, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.over {
		return 0, nil, false
	}
	s.nextID++
	ch := make(chan result, 1)
	s.pending[s.nextID] = ch
	return s.nextID, ch, true
}

func (s *session) unregister(id uint64) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}

func (s *session) answer(id uint64, r result) {
	s.mu.Lock()
	ch := s.pending[id]
	delete(s.pending, id)
	s.mu.Unlock()
	if ch != nil {
		ch <- r
	}
}

// writeLoop writes frames as they come and flushes when none is waiting,
// so that concurrent publishers share system calls.
func (s *session) writeLoop() {
	defer s.c.wg.Done()
	bw := newWriter(s.uc)
	defer putWriter(bw)
	for {
		var f []byte
		select {
		case f = <-s.out:
		case <-s.dead:
			return
		}
		_, err := bw.Write(f)
	drain:
		for err == nil {
			select {
			case f = <-s.out:
				_, err = bw.Write(f)
			default:
				break drain
			}
		}
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			// The leader hung up, maybe after saying why: leave the
			// verdict to the reader, which gets the bye or EOF.
			s.uc.CloseWrite()
			return
		}
	}
}

func (s *session) readLoop() {
	defer s.c.wg.Done()
	defer close(s.done)
	err := s.read()
	s.fr.release()
	s.fail(err)
	s.mu.Lock()
	s.over = true
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, ch := range pending {
		ch <- result{err: fmt.Errorf("%w (%v)", ErrLeaderChanged, s.err)}
	}
}

// read handles frames until the session ends, and returns why.
func (s *session) read() error {
	for {
		t, body, err := s.fr.next()
		if err != nil {
			return s.readError(err)
		}
		if err := s.handleFrame(t, body); err != nil {
			return err
		}
	}
}

// readError is why the session ended when a read failed.
func (s *session) readError(err error) error {
	select {
	case <-s.dead:
		return s.err
	default:
	}
	switch {
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: connection closed without a reason", ErrLeaderGone)
	case errors.Is(err, ErrProtocol), errors.Is(err, ErrTooLarge):
		return err
	default:
		return fmt.Errorf("%w: %v", ErrLeaderGone, err)
	}
}

// handleFrame acts on one frame from the leader; an error ends the session.
func (s *session) handleFrame(t frameType, body []byte) error {
	switch t {
	case fMessage:
		return s.deliver(body)
	case fAck:
		id, seq, err := decodeAck(body)
		if err == nil {
			s.answer(id, result{seq: seq})
		}
		return err
	case fReply:
		id, status, data, err := decodeReply(body)
		if err == nil {
			s.answer(id, result{status: status, data: append([]byte(nil), data...)})
		}
		return err
	case fBye:
		y, err := decodeBye(body)
		if err != nil {
			return err
		}
		s.bye = &y
		return byeErr(y.reason, y.text)
	default:
		return fmt.Errorf("%w: unexpected frame type %d from the leader", ErrProtocol, t)
	}
}

// deliver queues one message for the application, or ends the session of
// a member that left too many unread.
func (s *session) deliver(body []byte) error {
	m, err := decodeMessage(body)
	if err != nil {
		return err
	}
	c := s.c
	ev := Event{Kind: EventMessage, Message: Message{Epoch: m.epoch, Seq: m.seq, PID: int(m.pid), Data: append([]byte(nil), m.data...)}}
	select {
	case c.events <- ev:
		c.lastSeq = m.seq
		return nil
	default:
		return fmt.Errorf("%w: %d events were not read", ErrSlowConsumer, len(c.events))
	}
}
