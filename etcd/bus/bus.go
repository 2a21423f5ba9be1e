package bus

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	lrbus "github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/etcd/internal/seam"
)

// Bus key directories under a name's base.
const (
	dirServe = "~bus/serve/"
	dirBus   = "~bus/msg/"
	dirReq   = "~bus/req/"
)

// Defaults of the lrbus.
const (
	// DefaultQueue is how many messages Server.Publish queues before
	// it drops with ErrFull; at most DefaultQueueBytes.
	DefaultQueue      = 4096
	DefaultQueueBytes = 16 << 20
	// DefaultEventBuffer is how many messages a Client keeps unread in
	// Events before it drops messages and flags a gap.
	DefaultEventBuffer = 1024
	// busDrain bounds how long a stopping server goes on committing what
	// was queued before it stopped.
	busDrain = 2 * time.Second
	// busRoundTrip bounds one write of the lrbus.
	busRoundTrip = 10 * time.Second
)

// ErrFull is Server.Publish's answer when its queue is full because
// etcd commits slower than the leader publishes: the message is dropped,
// and the next message that is committed reaches members with Gap set.
var ErrFull = errors.New("etcd: the bus's publish queue is full (etcd commits slower than the leader publishes); the message was dropped and members will see a gap")

// Option configures Listen.
type Option func(*busConfig)

type busConfig struct {
	handler    lrbus.Handler
	maxMsg     int
	queue      int
	queueBytes int
}

// WithHandler answers members' requests with h. Without it, requests
// fail with lrbus.ErrNoHandler.
func WithHandler(h lrbus.Handler) Option { return func(c *busConfig) { c.handler = h } }

// WithMaxMessageSize sets the largest payload of a message, request or
// reply. Default lrbus.DefaultMaxMessageSize (1 MiB), which fits etcd's
// default --max-request-bytes (1.5 MiB); above that etcd refuses the write
// and the caller gets lrbus.ErrTooLarge.
func WithMaxMessageSize(n int) Option { return func(c *busConfig) { c.maxMsg = n } }

// WithQueue bounds what Server.Publish queues: messages and bytes.
// Defaults DefaultQueue and DefaultQueueBytes.
func WithQueue(messages, bytes int) Option {
	return func(c *busConfig) { c.queue, c.queueBytes = messages, bytes }
}

// DialOptions are a member's choices for Dial.
type DialOptions struct {
	// WaitForLeader makes Dial, Publish and Request wait, until their
	// context ends, while nobody serves, instead of failing with
	// lrbus.ErrNoLeader.
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
		clientv3.Compare(clientv3.CreateRevision(t.base+seam.DirSteal), "<", t.info.GrantRev+1).WithPrefix(),
	}
}

func (t *busTerm) leader() lrbus.Leader {
	i := t.info
	return lrbus.Leader{Name: i.Name, PID: i.PID, Epoch: i.Epoch, Since: i.Since, Mode: i.Mode, Host: i.Host}
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
		return nil, fmt.Errorf("%w: empty reply", lrbus.ErrProtocol)
	}
	switch v[0] {
	case repOK:
		return append([]byte(nil), v[1:]...), nil
	case repErr:
		return nil, fmt.Errorf("%w: %s", lrbus.ErrHandler, v[1:])
	case repNone:
		return nil, lrbus.ErrNoHandler
	case repTooBig:
		return nil, fmt.Errorf("%w: the leader's reply: %s", lrbus.ErrTooLarge, v[1:])
	case repStopped:
		return nil, fmt.Errorf("%w: the leader stopped serving before its handler answered", lrbus.ErrLeaderChanged)
	}
	return nil, fmt.Errorf("%w: reply of kind %q", lrbus.ErrProtocol, v[0])
}

// tooLarge reports whether etcd or gRPC refused a write for its size.
func tooLarge(err error) bool { return seam.TooLarge(err) }

// grant is what the bus reads of a grant marker (package etcd's held).
type grant struct {
	Mode    elect.Mode `json:"mode"`
	PID     int        `json:"pid"`
	Host    string     `json:"host"`
	Epoch   uint64     `json:"epoch"`
	Granted time.Time  `json:"granted"`
}

func encode(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
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
		c.maxMsg = lrbus.DefaultMaxMessageSize
	}
	if c.queue <= 0 {
		c.queue = DefaultQueue
	}
	if c.queueBytes <= 0 {
		c.queueBytes = DefaultQueueBytes
	}
	return c
}
