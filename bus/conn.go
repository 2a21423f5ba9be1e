package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// conn is one member's connection on the leader. Its reader runs in the
// goroutine that accepted it; its writer drains a bounded queue in
// another, so that publishing only ever appends to queues.
type conn struct {
	s           *Server
	uc          sockConn
	pid, uid    int
	publishOnly bool

	ctx    context.Context // ends with the connection; handlers' ctx
	cancel context.CancelFunc
	sem    chan struct{}

	mu     sync.Mutex
	q      [][]byte
	spare  [][]byte
	qbytes int
	last   *bye // set once the connection is to end; written after q
	wake   chan struct{}

	closeOnce sync.Once
}

// handle checks the peer, reads its hello and runs the connection.
func (s *Server) handle(uc sockConn) {
	defer s.wg.Done()
	uid, pid, err := peerCred(uc)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		// No peer credentials on this platform: the socket's mode 0600
		// in a directory of ours is the only check (see doc.go).
		uid = s.uid
	case err != nil:
		uc.Close()
		return
	case uid != s.uid:
		refuse(uc, bye{reason: byeRefused, text: fmt.Sprintf("uid %d may not use a bus of uid %d", uid, s.uid)})
		return
	}
	fr := newFrameReader(uc, s.cfg.maxMsg+frameSlack)
	defer fr.release()
	uc.SetReadDeadline(time.Now().Add(helloTimeout))
	t, body, err := fr.next()
	if err == nil && t != fClientHello {
		err = fmt.Errorf("%w: expected a hello, got frame type %d", ErrProtocol, t)
	}
	var h clientHello
	if err == nil {
		h, err = decodeClientHello(body)
	}
	if err == nil && h.version != protoVersion {
		err = fmt.Errorf("%w: protocol version %d, this leader speaks %d", ErrProtocol, h.version, protoVersion)
	}
	if err != nil {
		refuse(uc, bye{reason: byeProtocol, text: err.Error()})
		return
	}
	uc.SetReadDeadline(time.Time{})
	if pid == 0 {
		pid = int(h.pid)
	}
	c := &conn{s: s, uc: uc, pid: pid, uid: uid, publishOnly: h.flags&flagPublishOnly != 0,
		sem: make(chan struct{}, maxInFlight), wake: make(chan struct{}, 1)}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	if !s.join(c) {
		refuse(uc, bye{reason: byeStepDown})
		c.cancel()
		return
	}
	s.wg.Add(1)
	go c.writeLoop()
	c.readLoop(fr)
}

// refuse tells a peer that is not admitted why, without waiting long.
func refuse(uc sockConn, y bye) {
	uc.SetWriteDeadline(time.Now().Add(time.Second))
	uc.Write(y.encode())
	uc.Close()
}

func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// enqueue appends a frame without blocking; a full queue cuts the member
// off. Messages are enqueued under the server's lock, which orders them.
func (c *conn) enqueue(f []byte) {
	c.mu.Lock()
	switch {
	case c.last != nil:
	case len(c.q) >= c.s.cfg.queueLen || c.qbytes+len(f) > c.s.cfg.queueBytes:
		c.endLocked(bye{reason: byeSlow,
			text: fmt.Sprintf("%d frames (%d bytes) waiting for this member", len(c.q), c.qbytes)}, true)
	default:
		c.q = append(c.q, f)
		c.qbytes += len(f)
	}
	c.mu.Unlock()
	c.signal()
}

// end makes y the connection's last frame. With drop, what is queued is
// discarded (a slow member); otherwise it is written first (a leader
// stepping down). Either way the writer gets a grace period, after which
// a member that still does not read is dropped without the reason.
func (c *conn) end(y bye, drop bool) {
	c.mu.Lock()
	c.endLocked(y, drop)
	c.mu.Unlock()
	c.signal()
}

func (c *conn) endLocked(y bye, drop bool) {
	if c.last != nil {
		return
	}
	c.last = &y
	if drop {
		c.q, c.qbytes = nil, 0
	}
	c.uc.SetWriteDeadline(time.Now().Add(c.s.cfg.grace))
}

// writeLoop writes whatever is queued in one batch and one flush, so that a
// burst costs one system call per member rather than one per message.
func (c *conn) writeLoop() {
	defer c.s.wg.Done()
	defer c.close()
	bw := newWriter(c.uc)
	defer putWriter(bw)
	for range c.wake {
		c.mu.Lock()
		batch, last := c.q, c.last
		c.q, c.spare, c.qbytes = c.spare[:0], nil, 0
		c.mu.Unlock()

		var err error
		for _, f := range batch {
			if _, err = bw.Write(f); err != nil {
				break
			}
		}
		if err == nil && last != nil {
			_, err = bw.Write(last.encode())
		}
		if err == nil {
			err = bw.Flush()
		}
		clear(batch)
		c.mu.Lock()
		c.spare = batch[:0]
		c.mu.Unlock()
		if err != nil || last != nil {
			return
		}
	}
}

// close ends the connection for good: the member is forgotten and its
// handlers' contexts end.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.end(bye{reason: byeClosed}, true)
		c.uc.Close()
		c.cancel()
		c.s.leave(c)
	})
}

// readLoop handles the member's frames. A malformed or oversized frame
// ends this connection only, with the reason.
func (c *conn) readLoop(fr *frameReader) {
	for {
		t, body, err := fr.next()
		if err != nil {
			c.endOnReadError(err)
			return
		}
		if !c.handleFrame(t, body) {
			return
		}
	}
}

// endOnReadError ends the connection after a failed read, telling the
// member why when the fault was its frame.
func (c *conn) endOnReadError(err error) {
	switch {
	case errors.Is(err, ErrTooLarge):
		c.end(bye{reason: byeTooLarge, text: err.Error()}, true)
	case errors.Is(err, ErrProtocol):
		c.end(bye{reason: byeProtocol, text: err.Error()}, true)
	default: // EOF, a closed or broken connection
		c.close()
	}
}

// handleFrame acts on one frame from the member and reports whether the
// connection goes on.
func (c *conn) handleFrame(t frameType, body []byte) bool {
	switch t {
	case fPublish:
		return c.handlePublish(t, body)
	case fRequest:
		return c.handleRequest(t, body)
	case fBye:
		c.close()
		return false
	default:
		err := fmt.Errorf("%w: unexpected frame type %d from a member", ErrProtocol, t)
		c.end(bye{reason: byeProtocol, text: err.Error()}, true)
		return false
	}
}

func (c *conn) handlePublish(t frameType, body []byte) bool {
	id, data, err := decodeID(t, body)
	if err != nil {
		c.end(bye{reason: byeProtocol, text: err.Error()}, true)
		return false
	}
	if len(data) > c.s.cfg.maxMsg {
		err = fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(data), c.s.cfg.maxMsg)
		c.end(bye{reason: byeTooLarge, text: err.Error()}, true)
		return false
	}
	_, err = c.s.publish(c, id, c.pid, data)
	return err == nil // else stepping down: the bye is on its way
}

// handleRequest starts serving one request, at most cap(c.sem) at once
// per member; an oversized one is refused with a reply, not a bye.
func (c *conn) handleRequest(t frameType, body []byte) bool {
	id, data, err := decodeID(t, body)
	if err != nil {
		c.end(bye{reason: byeProtocol, text: err.Error()}, true)
		return false
	}
	if len(data) > c.s.cfg.maxMsg {
		c.enqueue(encodeReply(id, replyTooLarge, fmt.Appendf(nil, "%d bytes, the limit is %d", len(data), c.s.cfg.maxMsg)))
		return true
	}
	select {
	case c.sem <- struct{}{}:
	case <-c.ctx.Done():
		return false
	}
	c.s.wg.Add(1)
	go c.serveRequest(id, Request{PID: c.pid, UID: c.uid, Data: append([]byte(nil), data...)})
	return true
}

func (c *conn) serveRequest(id uint64, req Request) {
	defer c.s.wg.Done()
	defer func() { <-c.sem }()
	if out, ok := c.s.retainedReply(req.Data); ok { // retain.go
		c.enqueue(encodeReply(id, replyOK, out))
		return
	}
	h := c.s.cfg.handler
	if h == nil {
		c.enqueue(encodeReply(id, replyNoHandler, nil))
		return
	}
	out, err := h(c.ctx, req)
	switch {
	case err != nil:
		c.enqueue(encodeReply(id, replyErr, []byte(err.Error())))
	case len(out) > c.s.cfg.maxMsg:
		c.enqueue(encodeReply(id, replyErr, fmt.Appendf(nil, "reply of %d bytes exceeds the limit of %d", len(out), c.s.cfg.maxMsg)))
	default:
		c.enqueue(encodeReply(id, replyOK, out))
	}
}
