package bus

import (
	"time"

	"github.com/leaderrun/leaderrun/elect"
)

// EventKind says what an Event reports.
type EventKind int

const (
	// EventMessage: a message was published on the bus.
	EventMessage EventKind = 1 + iota
	// EventLeader: the client is connected to a leader, the first one or
	// a new one after an EventLost.
	EventLeader
	// EventLost: the connection to the leader ended, with the reason in
	// Err. The client reconnects by itself when a leader serves again.
	EventLost
)

func (k EventKind) String() string {
	switch k {
	case EventMessage:
		return "message"
	case EventLeader:
		return "leader"
	case EventLost:
		return "lost"
	}
	return "unknown"
}

// Event is what a Client receives, in order, from Events.
type Event struct {
	Kind EventKind
	// Message is set for EventMessage.
	Message Message
	// Leader is the new leader for EventLeader and the lost one for
	// EventLost.
	Leader Leader
	// Gap, on an EventLeader after the first, reports that messages may
	// have been missed since the last one received: the connection was
	// cut, or the new term had already published when this client joined.
	// It is false only when the sequence provably continues: the old
	// leader stepped down after everything it published had arrived and
	// the new term has published nothing yet, or the client reconnected to
	// the same term with nothing missed. On an EventMessage (only from a
	// bus that spans hosts, such as etcd's, which can lose part of a term
	// to a compaction or a reconnect) it reports that messages of this
	// term before this one were missed.
	Gap bool
	// Err is why the connection ended, for EventLost: ErrLeaderGone,
	// ErrSlowConsumer, ErrProtocol, ErrTooLarge, or ErrClosed.
	Err error
}

// Message is one published message.
type Message struct {
	// Epoch is the leader's term that sequenced the message, and Seq its
	// place in that term, counting from 1 without holes.
	Epoch, Seq uint64
	// PID is the publisher's process id.
	PID int
	// Data belongs to the receiver.
	Data []byte
}

// Leader describes the leader that serves the bus.
type Leader struct {
	Name  string
	PID   int
	Epoch uint64
	Since time.Time
	Mode  elect.Mode
	// Host is the leader's host, for a bus that spans hosts (etcd's);
	// empty on the Unix-socket bus, whose leader is on this host.
	Host string
}

func (h serverHello) leader() Leader {
	return Leader{Name: h.name, PID: int(h.pid), Epoch: h.epoch, Since: time.Unix(0, h.since), Mode: elect.Mode(h.mode)}
}
