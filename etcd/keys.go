package etcd

import (
	"encoding/json"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/elect"
)

// Key layout, under the prefix P and the name N (<id> is the session's
// lease in hex, a dash, and a per-Locker counter, so that one session can
// hold several requests and no id is ever used twice):
//
//	P/N/q/x/<id>   exclusive request, on the requester's lease
//	P/N/q/s/<id>   shared request, on the requester's lease
//	P/N/steal/<id> stealing request, ahead of q/, on the requester's lease
//	P/N/held/<id>  grant marker of request <id>, made in its grant txn
//	P/N/epoch      the last epoch granted, in decimal; no lease
//
// and the bus of N (see bus.go), while the holder of epoch E serves it,
// after every other key of N ("~" sorts last):
//
//	P/N/~bus/serve/<E>     who serves, copied from the grant marker, with
//	                       its key and creation revision; holder's lease
//	P/N/~bus/msg/<E>       the term's channel, on the holder's lease:
//	                       version n+1 is message seq n
//	P/N/~bus/req/<E>/<id>  a member's request, on its lease; the reply is
//	                       its second version
//
// A request's CreateRevision is its ticket: the queue is ordered by it,
// never by ModRevision, so nothing written later can reorder it. A request
// key stays until its term ends, so a holder is also a predecessor of
// every later request.
const (
	dirQueue     = "q/"
	dirExclusive = "q/x/"
	dirShared    = "q/s/"
	dirSteal     = "steal/"
	dirHeld      = "held/"
	keyEpoch     = "epoch"
)

func (l *Locker) base(name string) string { return l.prefix + name + "/" }

// lockKeys makes a watch of base (from base on) see only the name's lock
// keys, none of its bus, which sorts after them: the holder's monitor and
// the waiters are not woken by every message.
func lockKeys(base string) clientv3.OpOption { return clientv3.WithRange(base + "~") }

func requestKey(base string, req elect.Request, id string) string {
	switch {
	case req.Steal:
		return base + dirSteal + id
	case req.Mode == elect.Shared:
		return base + dirShared + id
	}
	return base + dirExclusive + id
}

// request is the value of a request key.
type request struct {
	Mode    elect.Mode `json:"mode"`
	PID     int        `json:"pid"`
	Host    string     `json:"host"`
	UID     int        `json:"uid"`
	Since   time.Time  `json:"since"`
	Command []string   `json:"command"`
	Steal   bool       `json:"steal,omitempty"`
	// Local names the requester's kernel and pid namespace (local.go).
	Local string `json:"local,omitempty"`
}

// held is the value of a grant marker.
type held struct {
	request
	Epoch   uint64    `json:"epoch"`
	Granted time.Time `json:"granted"`
	Key     string    `json:"key"` // the request key it grants
}

func encode(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// idOf is the last element of a key.
func idOf(key string) string {
	return key[strings.LastIndexByte(key, '/')+1:]
}
