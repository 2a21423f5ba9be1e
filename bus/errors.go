package bus

import "errors"

// Sentinel errors, checked with errors.Is.
var (
	// ErrNoLeader: nobody serves the bus for this name right now. Start a
	// leader, or dial with WaitForLeader to wait for one.
	ErrNoLeader = errors.New("bus: no leader is serving this name")
	// ErrLeaderChanged: the connection to the leader ended after a
	// request or publication was sent and before it was answered. It may
	// or may not have been handled; retry only what is safe to repeat.
	ErrLeaderChanged = errors.New("bus: leader changed before answering")
	// ErrLeaderGone: the leader stepped down or died. It is the reason of
	// an EventLost.
	ErrLeaderGone = errors.New("bus: leader stepped down")
	// ErrSlowConsumer: the connection was cut off because its member did
	// not keep up with the messages. The client reconnects by itself and
	// reports the gap.
	ErrSlowConsumer = errors.New("bus: cut off as a slow consumer; read Events promptly or dial with PublishOnly")
	// ErrTooLarge: a message or request is larger than the leader's
	// maximum message size.
	ErrTooLarge = errors.New("bus: message too large")
	// ErrProtocol: a peer sent a malformed, truncated or unexpected frame.
	ErrProtocol = errors.New("bus: malformed frame")
	// ErrRefused: the peer runs as another user. Only processes of the
	// same user may use a bus.
	ErrRefused = errors.New("bus: peer refused: it runs as another user")
	// ErrNoHandler: the leader serves no requests (Serve without
	// WithHandler).
	ErrNoHandler = errors.New("bus: the leader handles no requests")
	// ErrHandler wraps the error text returned by the leader's handler.
	ErrHandler = errors.New("bus: leader's handler failed")
	// ErrClosed: the Client or Server was closed.
	ErrClosed = errors.New("bus: closed")
	// ErrNotExclusive: Serve needs an exclusive leadership, since several
	// shared holders cannot all own one socket.
	ErrNotExclusive = errors.New("bus: serving needs an exclusive leadership")
)
