package etcd

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// A watch can lag without a word: a member that is stopped (SIGSTOP, a
// frozen VM) or cut off keeps its TCP connection open and sends nothing,
// not even the cancel that clientv3.WithRequireLeader asks for, while the
// client's other requests reach the other members. A waiter would then
// hear of its turn late, and a holder of its keys' deletion late. So every
// watch of the lock path is a liveWatch: on a gRPC stream of its own (so
// that starting it again picks a member anew: the client balances streams
// over the endpoints), it asks the server for a progress notice once it
// has heard nothing for a while, and when even that goes unanswered it is
// given up, and its owner reads again and watches anew. Safety does not
// rest on it: a grant is confirmed by a linearizable read before it is
// taken up (confirm), and a term ends by its own deadline.

// watchStreams numbers the watch streams of this process.
var watchStreams atomic.Uint64

// progressEvery is how long a watch may be silent before it is asked for
// progress; twice that without an answer, it is started again.
func (l *Locker) progressEvery() time.Duration {
	return min(max((l.ttl-l.margin)/4, 500*time.Millisecond), 2*time.Second)
}

// rpcTimeout bounds one read, grant or release of the lock path, so that
// one stopped member does not hold it: the next try goes to another
// member (the client balances requests over the endpoints).
func (l *Locker) rpcTimeout() time.Duration {
	return min(max(l.margin/2, 500*time.Millisecond), 2*time.Second)
}

// rpcTries is how many times a read or release of the lock path is sent
// before it fails.
const rpcTries = 6

type liveWatch struct {
	l      *Locker
	ctx    context.Context // the stream's
	cancel context.CancelFunc
	ch     clientv3.WatchChan
	own    clientv3.WatchChan // the second key, if any (watchAlso)
	timer  *time.Timer
	asked  bool
}

// watch starts a liveWatch of key (with opts) under ctx.
func (l *Locker) watch(ctx context.Context, key string, opts ...clientv3.OpOption) *liveWatch {
	sctx := metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(ctx), "leaderrun-watch", strconv.FormatUint(watchStreams.Add(1), 10))
	w := &liveWatch{l: l}
	w.ctx, w.cancel = context.WithCancel(sctx)
	w.ch = l.cli.Watch(w.ctx, key, opts...)
	w.timer = time.NewTimer(l.progressEvery())
	return w
}

// watchAlso watches key as well, on the same stream: its responses come
// on w.own.
func (w *liveWatch) watchAlso(key string, opts ...clientv3.OpOption) {
	w.own = w.l.cli.Watch(w.ctx, key, opts...)
}

// heard notes a response: the watch is live.
func (w *liveWatch) heard() {
	w.asked = false
	w.timer.Reset(w.l.progressEvery())
}

// silent is called when w.timer fires: it asks for progress the first
// time, and reports true (give the watch up) when that went unanswered.
func (w *liveWatch) silent() bool {
	if w.asked {
		return true
	}
	w.asked = true
	go w.l.cli.RequestProgress(w.ctx)
	w.timer.Reset(w.l.progressEvery())
	return false
}

func (w *liveWatch) stop() {
	w.timer.Stop()
	w.cancel()
}

// testHookWatchResponse, when set by a test, sees every response of a
// lock-path watch first; false drops it, as a member that stopped would.
var testHookWatchResponse func(w *liveWatch, wr clientv3.WatchResponse) bool

// pass filters a response through testHookWatchResponse.
func (w *liveWatch) pass(wr clientv3.WatchResponse) bool {
	return testHookWatchResponse == nil || testHookWatchResponse(w, wr)
}

// sendOnce sends a request of the lock path once on the first try and
// twice at once on every later try (see twice).
func sendOnce[T any](ctx context.Context, try int, f func(context.Context) (T, error)) (T, error) {
	if try == 0 {
		return f(ctx)
	}
	return twice(ctx, f)
}

// twice sends a request twice at once and returns the first answer that
// is no error (the other is then cancelled), or the first error. A try
// that timed out most likely went to a member that is stopped (it keeps
// its connections and answers nothing); the client's balancer sends
// consecutive requests round the endpoints, so sent once again the retry
// may well go to that member again, when another request of this process
// (a renewal, another term's) went in between: it did in 4 tries of 5 in
// a row with a follower stopped. Of two sent at once, one goes elsewhere.
// Only for requests that may be applied twice: reads, and txns guarded
// by what they change.
func twice[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		v   T
		err error
	}
	ch := make(chan answer, 2)
	for range 2 {
		go func() {
			v, err := f(ctx)
			ch <- answer{v, err}
		}()
	}
	first := <-ch
	if first.err == nil {
		return first.v, nil
	}
	if second := <-ch; second.err == nil {
		return second.v, nil
	}
	return first.v, first.err
}
