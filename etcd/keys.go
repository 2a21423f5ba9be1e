package etcd

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/etcd/internal/seam"
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
//	P/N/gone/<id>  request <id> abandoned: its creating txn timed out,
//	               and a later one of the same Acquire fenced it (see
//	               createTxn); on the requester's lease, empty
//
// and the bus of N (see package etcd/bus), while the holder of epoch E serves it,
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
	dirSteal     = seam.DirSteal
	dirHeld      = seam.DirHeld
	keyEpoch     = "epoch"
	dirGone      = "gone/"
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

// A key under a name's q/, steal/ or held/ that leaderrun did not write
// (another application's key whose prefix nests in ours, a typo, a key of
// another version) is no request: every view, guard, hand-over and Query
// ignores it, so it never blocks anyone, and Locker.Ignored lists it.

// maxStrays bounds the foreign keys a guard can step round (each costs two
// compares in a txn; etcd allows 128 operations by default).
const maxStrays = 50

// scanLimit is how many keys a read of the queue takes at a time: the one
// it looks for, and strays in front of it.
const scanLimit = 8

// afterLimit is how many of the requests behind it a new holder reads, to
// hand the lock on at its release; the rest come through its watch.
const afterLimit = 2

// validID reports whether id is <16 hex digits of lease>-<decimal>.
func validID(id string, lease int64) bool {
	hex, n, ok := strings.Cut(id, "-")
	if !ok || lease <= 0 || hex != fmt.Sprintf("%016x", lease) || n == "" {
		return false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseRequest parses kv as a request of the name at base: a key under
// q/x/, q/s/ or steal/ whose id names its lease, holding a request of that
// directory's mode.
func parseRequest(base string, kv *mvccpb.KeyValue) (request, bool) {
	rest, ok := strings.CutPrefix(string(kv.Key), base)
	if !ok {
		return request{}, false
	}
	var dir string
	for _, d := range []string{dirExclusive, dirShared, dirSteal} {
		if strings.HasPrefix(rest, d) {
			dir = d
		}
	}
	if dir == "" || !validID(rest[len(dir):], kv.Lease) {
		return request{}, false
	}
	var r request
	if json.Unmarshal(kv.Value, &r) != nil || r.PID <= 0 {
		return request{}, false
	}
	switch dir {
	case dirShared:
		ok = r.Mode == elect.Shared && !r.Steal
	case dirSteal:
		ok = r.Mode == elect.Exclusive && r.Steal
	default:
		ok = r.Mode == elect.Exclusive && !r.Steal
	}
	return r, ok
}

// parseHeld parses kv as a grant marker of the name at base: held/<id> on
// the lease its id names, granting the request <id>.
func parseHeld(base string, kv *mvccpb.KeyValue) (held, bool) {
	id, ok := strings.CutPrefix(string(kv.Key), base+dirHeld)
	if !ok || !validID(id, kv.Lease) {
		return held{}, false
	}
	var h held
	if json.Unmarshal(kv.Value, &h) != nil || h.Epoch == 0 {
		return held{}, false
	}
	for _, d := range []string{dirExclusive, dirShared, dirSteal} {
		if h.Key == base+d+id {
			return h, true
		}
	}
	return held{}, false
}

// emptyBut holds when the range of dir has no key but strays, each still
// the key it was (same creation revision).
func emptyBut(dir string, strays []*mvccpb.KeyValue) []clientv3.Cmp {
	if len(strays) == 0 {
		return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(dir), "=", 0).WithPrefix()}
	}
	s := slices.Clone(strays)
	slices.SortFunc(s, func(a, b *mvccpb.KeyValue) int { return strings.Compare(string(a.Key), string(b.Key)) })
	var cmps []clientv3.Cmp
	lo := dir
	for _, kv := range s {
		k := string(kv.Key)
		if lo < k {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(lo), "=", 0).WithRange(k))
		}
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", kv.CreateRevision))
		lo = k + "\x00"
	}
	return append(cmps, clientv3.Compare(clientv3.CreateRevision(lo), "=", 0).WithRange(clientv3.GetPrefixRangeEnd(dir)))
}

// tooManyStrays is the error of a name with more than maxStrays foreign
// keys in one directory.
func tooManyStrays(dir string) error {
	return fmt.Errorf("%w: more than %d keys under %s were not written by leaderrun; remove them (etcdctl del KEY) or use another --etcd-prefix", elect.ErrCorrupt, maxStrays, dir)
}
