package bus

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync"
)

// A retained value is the leader's current state of something (a setting,
// a status, who is visible), as etcd's Proclaim and Observe keep it: a
// member that connects gets it at once instead of waiting for the next
// change. The leader sets it with Server.Retain, which also publishes it;
// a member asks for it with Client.Retained right after EventLeader and
// recognises later updates among the messages with RetainedUpdate.
//
// Both travel as ordinary frames: the request and the published update
// start with retainedMagic, which no other payload should.
var retainedMagic = []byte("\x00leaderrun-retained\x00")

// retained holds each server's value; kept beside Server rather than in
// it, since only servers that retain use it.
var retained sync.Map // *Server -> *retainedValue

type retainedValue struct {
	mu   sync.Mutex
	data []byte
	seq  uint64
}

// Retain makes data the retained value and publishes it (as
// RetainedUpdate recognises) to every member, returning its sequence
// number. A member connecting later gets it from Client.Retained.
func (s *Server) Retain(data []byte) (uint64, error) {
	v, _ := retained.LoadOrStore(s, &retainedValue{})
	rv := v.(*retainedValue)
	// Under the value's lock, so that the value kept and the order of
	// publication agree.
	rv.mu.Lock()
	defer rv.mu.Unlock()
	seq, err := s.Publish(append(append([]byte{}, retainedMagic...), data...))
	if err != nil {
		return 0, err
	}
	rv.data, rv.seq = append([]byte{}, data...), seq
	return seq, nil
}

// retainedReply answers a member's Retained request: the sequence number
// of the value (0: none) and the value.
func (s *Server) retainedReply(req []byte) ([]byte, bool) {
	if !bytes.Equal(req, retainedMagic) {
		return nil, false
	}
	out := make([]byte, 8)
	if v, ok := retained.Load(s); ok {
		rv := v.(*retainedValue)
		rv.mu.Lock()
		binary.BigEndian.PutUint64(out, rv.seq)
		out = append(out, rv.data...)
		rv.mu.Unlock()
	}
	return out, true
}

// forgetRetained drops a stopped server's value.
func (s *Server) forgetRetained() { retained.Delete(s) }

// ErrNoRetained: the leader has not retained a value.
var ErrNoRetained = errors.New("bus: the leader has retained no value")

// Retained returns the leader's retained value and the sequence number it
// was published with, in this term: apply updates (RetainedUpdate) of a
// higher Seq only. It fails with ErrNoRetained if there is none, and as
// Request does otherwise.
func (c *Client) Retained(ctx context.Context) (data []byte, seq uint64, err error) {
	b, err := c.Request(ctx, retainedMagic)
	if err != nil {
		return nil, 0, err
	}
	if len(b) < 8 {
		return nil, 0, ErrProtocol
	}
	seq = binary.BigEndian.Uint64(b)
	if seq == 0 {
		return nil, 0, ErrNoRetained
	}
	return b[8:], seq, nil
}

// RetainedUpdate reports whether m is an update of the retained value, and
// returns the value.
func RetainedUpdate(m Message) ([]byte, bool) {
	return bytes.CutPrefix(m.Data, retainedMagic)
}
