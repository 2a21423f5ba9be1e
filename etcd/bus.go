package etcd

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
)

// The bus over etcd
//
// A name's bus is package bus's contract (who leads, ordered fan-out
// within a term, requests to the leader) kept in etcd, so that its
// members may be on any host. The exclusive holder serves it with
// Locker.ListenBus and BusServer.Serve; members call Locker.DialBus and
// read BusClient.Events. Events, errors and order are those of package
// bus (see its Guarantees); what differs is said here.
//
// Keys, under the name's base P/N/ (see keys.go):
//
//	P/N/~bus/serve/<E>     who serves term E: a copy of the grant marker's
//	                       fields, its key and creation revision, whether
//	                       requests are handled and the payload limit; on
//	                       the holder's lease, made by ListenBus with the
//	                       channel
//	P/N/~bus/msg/<E>       the term's channel, on the holder's lease:
//	                       version 1 is empty, the n-th message is version
//	                       n+1, so seq = Version-1 and order = ModRevision
//	P/N/~bus/req/<E>/<id>  a member's request, on the member's lease; the
//	                       leader puts its reply into the same key
//	                       (version 2)
//
// "~" sorts after every other key of the name, so a watcher of the lock
// alone can leave the bus's traffic out with the range [P/N/, P/N/~).
//
// Every write to a term's keys is one txn guarded by the term itself: the
// grant marker's creation revision (a release, an expiry or a revoke
// deletes it), the serve key's creation revision (the server stopped) and
// no steal key created after the grant (the holder has been deposed). A
// message or request addressed to a term that has ended therefore never
// lands, in that term or a later one. A member follows the name with one
// Watch on P/N/ from the revision it read, so that leader changes,
// messages and replies reach it in etcd's one order: a term's EventLost
// comes after all of its messages. When that watch fails it resumes from
// the last revision it saw, and only when etcd has compacted that history
// does it read the present state again and report what it lost as Gap.
//
// Nothing outlives a lease: a server that stops deletes its serve key,
// channel and pending requests in one txn; a member deletes its request
// once answered (retrying while its session lives); and a holder that
// dies takes its keys with its lease.
//
// Cost: every message and every request is a raft commit and is sent to
// every watcher of P/N/: the members, and for now also the holder's term
// monitor and the name's waiters, which watch all of P/N/ although the
// range above would do. The bus is for control traffic, not data streams. A
// publish costs one guarded txn, about 1.5 times a plain Put seen by a
// Watch (0.35-0.4ms on a one-member etcd on loopback, more on a
// disk-backed cluster; BenchmarkBus measures both). Every message also
// stays in etcd's history until the cluster is compacted: run etcd with
// --auto-compaction-retention, or a chatty --fanout fills its database to
// the quota. The server commits one message per round trip, in order;
// what COMMAND prints faster waits in a bounded queue and, when the queue
// is full, is dropped (ErrBusFull) and flagged to members as a gap.
//
// Where it differs from the Unix-socket bus:
//
//   - BusServer.Publish returns seq 0: members publish into the same
//     channel, so a message's place is known only once etcd commits it
//     (BusServer.PublishWait returns it).
//   - A member publishes straight into etcd, so fan-out goes on while the
//     leader's process is stopped; a stopped leader's lease expires
//     within the TTL, and then its members see EventLost. Requests wait
//     for the handler.
//   - Nobody is cut off as a slow consumer: a member that leaves more
//     than BusDial.EventBuffer messages unread loses the excess, and the
//     next message it delivers has Gap set. Gap also marks a message
//     after a compaction or the leader's full queue.
//   - A Publish or Request whose term ended before etcd committed it was
//     provably not delivered; it goes on with the next leader (or fails
//     with bus.ErrNoLeader) rather than with bus.ErrLeaderChanged, which
//     is kept for an outcome that is unknown (etcd unreachable) and for a
//     term that ends after a request was sent.
//   - Access is etcd's: whoever may write the prefix may publish and
//     request, and bus.Request's PID and UID are what the member states,
//     not what a kernel reports.

// Bus key directories under a name's base.
const (
	dirServe = "~bus/serve/"
	dirBus   = "~bus/msg/"
	dirReq   = "~bus/req/"
)

// Defaults of the bus.
const (
	// DefaultBusQueue is how many messages BusServer.Publish queues before
	// it drops with ErrBusFull; at most DefaultBusQueueBytes.
	DefaultBusQueue      = 4096
	DefaultBusQueueBytes = 16 << 20
	// DefaultEventBuffer is how many messages a BusClient keeps unread in
	// Events before it drops messages and flags a gap.
	DefaultEventBuffer = 1024
	// busDrain bounds how long a stopping server goes on committing what
	// was queued before it stopped.
	busDrain = 2 * time.Second
	// busRoundTrip bounds one write of the bus.
	busRoundTrip = 10 * time.Second
)

// ErrBusFull is BusServer.Publish's answer when its queue is full because
// etcd commits slower than the leader publishes: the message is dropped,
// and the next message that is committed reaches members with Gap set.
var ErrBusFull = errors.New("etcd: the bus's publish queue is full (etcd commits slower than the leader publishes); the message was dropped and members will see a gap")

// BusOption configures Locker.ListenBus.
type BusOption func(*busConfig)

type busConfig struct {
	handler    bus.Handler
	maxMsg     int
	queue      int
	queueBytes int
}

// WithBusHandler answers members' requests with h. Without it, requests
// fail with bus.ErrNoHandler.
func WithBusHandler(h bus.Handler) BusOption { return func(c *busConfig) { c.handler = h } }

// WithBusMaxMessageSize sets the largest payload of a message, request or
// reply. Default bus.DefaultMaxMessageSize (1 MiB), which fits etcd's
// default --max-request-bytes (1.5 MiB); above that etcd refuses the write
// and the caller gets bus.ErrTooLarge.
func WithBusMaxMessageSize(n int) BusOption { return func(c *busConfig) { c.maxMsg = n } }

// WithBusQueue bounds what BusServer.Publish queues: messages and bytes.
// Defaults DefaultBusQueue and DefaultBusQueueBytes.
func WithBusQueue(messages, bytes int) BusOption {
	return func(c *busConfig) { c.queue, c.queueBytes = messages, bytes }
}

// BusDial are a member's choices for Locker.DialBus.
type BusDial struct {
	// WaitForLeader makes DialBus, Publish and Request wait, until their
	// context ends, while nobody serves, instead of failing with
	// bus.ErrNoLeader.
	WaitForLeader bool
	// PublishOnly: the member only publishes or requests; Events carries
	// leader events only, and drops them if nobody reads.
	PublishOnly bool
	// EventBuffer is how many messages may wait unread in Events; beyond
	// that the client drops messages and the next one it delivers has
	// Gap set. Default DefaultEventBuffer.
	EventBuffer int
}

// serving is the value of a serve key.
type serving struct {
	Name     string     `json:"name"`
	Held     string     `json:"held"`      // the grant marker's key
	GrantRev int64      `json:"grant_rev"` // and its creation revision
	Epoch    uint64     `json:"epoch"`
	PID      int        `json:"pid"`
	Host     string     `json:"host"`
	Since    time.Time  `json:"since"`
	Mode     elect.Mode `json:"mode"`
	Handler  bool       `json:"handler"`
	Max      int        `json:"max"`
}

// busTerm is a serving term as a server or member knows it.
type busTerm struct {
	info     serving
	base     string
	serveKey string
	busKey   string
	reqDir   string
	serveRev int64 // the serve key's creation revision
}

func newBusTerm(base string, info serving, serveRev int64) *busTerm {
	e := strconv.FormatUint(info.Epoch, 10)
	return &busTerm{info: info, base: base, serveKey: base + dirServe + e, busKey: base + dirBus + e, reqDir: base + dirReq + e + "/", serveRev: serveRev}
}

// guards hold while the term lasts and is served: its grant marker is the
// one granted, its serve key the one made, and no steal came after the
// grant (a steal that is itself the holder was created before or with
// its grant).
func (t *busTerm) guards() []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(t.info.Held), "=", t.info.GrantRev),
		clientv3.Compare(clientv3.CreateRevision(t.serveKey), "=", t.serveRev),
		clientv3.Compare(clientv3.CreateRevision(t.base+dirSteal), "<", t.info.GrantRev+1).WithPrefix(),
	}
}

func (t *busTerm) leader() bus.Leader {
	i := t.info
	return bus.Leader{Name: i.Name, PID: i.PID, Epoch: i.Epoch, Since: i.Since, Mode: i.Mode, Host: i.Host}
}

// Values of the channel and of requests are binary, so that a 1 MiB
// payload is not inflated by base64 past etcd's request limit.
const (
	msgGap byte = 1 << 0 // the leader dropped messages before this one

	reqAsk     byte = 'q' // a request: uvarint pid, uvarint uid, data
	repOK      byte = 'r' // the handler's reply
	repErr     byte = 'e' // the handler's error text
	repNone    byte = 'n' // no handler
	repTooBig  byte = 't' // the reply exceeded the limit
	repStopped byte = 's' // the server stopped before the handler answered
)

func encodeMsg(flags byte, pid int, data []byte) string {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(data))
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(pid))
	return string(append(b, data...))
}

func decodeMsg(v []byte) (flags byte, pid int, data []byte, ok bool) {
	if len(v) < 2 {
		return 0, 0, nil, false
	}
	p, n := binary.Uvarint(v[1:])
	if n <= 0 {
		return 0, 0, nil, false
	}
	return v[0], int(p), v[1+n:], true
}

func encodeReq(pid, uid int, data []byte) string {
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(data))
	b = append(b, reqAsk)
	b = binary.AppendUvarint(b, uint64(pid))
	b = binary.AppendUvarint(b, uint64(uid))
	return string(append(b, data...))
}

func decodeReq(v []byte) (pid, uid int, data []byte, ok bool) {
	if len(v) < 3 || v[0] != reqAsk {
		return 0, 0, nil, false
	}
	p, n := binary.Uvarint(v[1:])
	if n <= 0 {
		return 0, 0, nil, false
	}
	u, m := binary.Uvarint(v[1+n:])
	if m <= 0 {
		return 0, 0, nil, false
	}
	return int(p), int(u), v[1+n+m:], true
}

// decodeReply turns a request key's second version into the answer.
func decodeReply(v []byte) ([]byte, error) {
	if len(v) == 0 {
		return nil, fmt.Errorf("%w: empty reply", bus.ErrProtocol)
	}
	switch v[0] {
	case repOK:
		return append([]byte(nil), v[1:]...), nil
	case repErr:
		return nil, fmt.Errorf("%w: %s", bus.ErrHandler, v[1:])
	case repNone:
		return nil, bus.ErrNoHandler
	case repTooBig:
		return nil, fmt.Errorf("%w: the leader's reply: %s", bus.ErrTooLarge, v[1:])
	case repStopped:
		return nil, fmt.Errorf("%w: the leader stopped serving before its handler answered", bus.ErrLeaderChanged)
	}
	return nil, fmt.Errorf("%w: reply of kind %q", bus.ErrProtocol, v[0])
}

// tooLarge reports whether etcd or gRPC refused a write for its size.
func tooLarge(err error) bool {
	// gRPC's own limit (codes.ResourceExhausted) says "message larger
	// than max".
	return errors.Is(err, rpctypes.ErrRequestTooLarge) ||
		strings.Contains(err.Error(), "request is too large") ||
		strings.Contains(err.Error(), "message larger than max")
}

func jsonUnmarshal(b []byte, v any) bool { return json.Unmarshal(b, v) == nil }

func parseServing(v []byte) (serving, bool) {
	var s serving
	if json.Unmarshal(v, &s) != nil || s.Held == "" || s.GrantRev == 0 {
		return serving{}, false
	}
	return s, true
}

func (c busConfig) withDefaults() busConfig {
	if c.maxMsg <= 0 {
		c.maxMsg = bus.DefaultMaxMessageSize
	}
	if c.queue <= 0 {
		c.queue = DefaultBusQueue
	}
	if c.queueBytes <= 0 {
		c.queueBytes = DefaultBusQueueBytes
	}
	return c
}
