package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/elect"
)

// Query returns the holders and the queue of name, read at one revision:
// holders in the order they were granted, then waiting requests in queue
// order (steals first). It writes nothing and wakes nobody. A holder's
// State is "running" while its lease lives: whether its process runs, on
// another host, cannot be seen. Every holder and request has its Host.
func (l *Locker) Query(ctx context.Context, name string) (elect.Snapshot, error) {
	snap := elect.Snapshot{Held: []elect.Holder{}, Pending: []elect.Pending{}}
	if err := elect.ValidateName(name); err != nil {
		return snap, err
	}
	resp, err := l.cli.Get(ctx, l.base(name), clientv3.WithPrefix())
	if err != nil {
		return snap, rpcErr(ctx, err)
	}
	l.collect(name, resp.Kvs, &snap)
	return snap, nil
}

// QueryAll is Query for every name under the prefix, read at one revision.
func (l *Locker) QueryAll(ctx context.Context) (elect.Snapshot, error) {
	resp, err := l.cli.Get(ctx, l.prefix, clientv3.WithPrefix())
	if err != nil {
		return elect.Snapshot{Held: []elect.Holder{}, Pending: []elect.Pending{}}, rpcErr(ctx, err)
	}
	byName := map[string][]*mvccpb.KeyValue{}
	var names []string
	for _, kv := range resp.Kvs {
		n, _, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), l.prefix), "/")
		if !ok || elect.ValidateName(n) != nil {
			continue
		}
		if byName[n] == nil {
			names = append(names, n)
		}
		byName[n] = append(byName[n], kv)
	}
	sort.Strings(names)
	snap := elect.Snapshot{Held: []elect.Holder{}, Pending: []elect.Pending{}}
	for _, n := range names {
		l.collect(n, byName[n], &snap)
	}
	return snap, nil
}

// Ignored lists the keys under name's queue, steal lane and grant markers
// (every name's, when name is "") that are not leaderrun's: keys of
// another application whose prefix nests in ours, typos, keys of another
// version. A Locker ignores them (they block nobody, and Query does not
// show them); they are listed so that someone can remove them.
func (l *Locker) Ignored(ctx context.Context, name string) ([]string, error) {
	from := l.prefix
	if name != "" {
		if err := elect.ValidateName(name); err != nil {
			return nil, err
		}
		from = l.base(name)
	}
	resp, err := l.cli.Get(ctx, from, clientv3.WithPrefix())
	if err != nil {
		return nil, rpcErr(ctx, err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		n, rest, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), l.prefix), "/")
		if !ok || elect.ValidateName(n) != nil {
			continue
		}
		base := l.base(n)
		switch {
		case strings.HasPrefix(rest, dirHeld):
			ok = isHeld(base, kv)
		case strings.HasPrefix(rest, dirQueue), strings.HasPrefix(rest, dirSteal):
			ok = isRequest(base, kv)
		}
		if !ok {
			keys = append(keys, string(kv.Key))
		}
	}
	return keys, nil
}

// Names lists the names that have keys under the prefix, sorted.
func (l *Locker) Names(ctx context.Context) ([]string, error) {
	resp, err := l.cli.Get(ctx, l.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, rpcErr(ctx, err)
	}
	seen := map[string]bool{}
	var names []string
	for _, kv := range resp.Kvs {
		n, _, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), l.prefix), "/")
		if ok && !seen[n] && elect.ValidateName(n) == nil {
			seen[n] = true
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

func (l *Locker) collect(name string, kvs []*mvccpb.KeyValue, snap *elect.Snapshot) {
	base := l.base(name)
	type req struct {
		kv  *mvccpb.KeyValue
		val request
	}
	granted := map[string]bool{}
	var holders []held
	var hrevs []int64
	var steals, queue []req
	for _, kv := range kvs {
		rest := strings.TrimPrefix(string(kv.Key), base)
		switch {
		case strings.HasPrefix(rest, dirHeld):
			if h, ok := parseHeld(base, kv); ok {
				granted[idOf(rest)] = true
				holders = append(holders, h)
				hrevs = append(hrevs, kv.CreateRevision)
			}
		case strings.HasPrefix(rest, dirSteal), strings.HasPrefix(rest, dirQueue):
			r, ok := parseRequest(base, kv)
			if !ok {
				continue // no request: it blocks nobody (Ignored)
			}
			if strings.HasPrefix(rest, dirSteal) {
				steals = append(steals, req{kv, r})
			} else {
				queue = append(queue, req{kv, r})
			}
		}
	}
	idx := make([]int, len(holders))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(i, j int) bool { return hrevs[idx[i]] < hrevs[idx[j]] })
	for _, i := range idx {
		h := holders[i]
		snap.Held = append(snap.Held, elect.Holder{Name: name, Mode: h.Mode, PID: h.PID, Epoch: h.Epoch, Since: h.Granted, Command: h.Command, State: "running", Host: h.Host})
	}
	byTicket := func(rs []req) {
		sort.Slice(rs, func(i, j int) bool { return rs[i].kv.CreateRevision < rs[j].kv.CreateRevision })
	}
	byTicket(steals)
	byTicket(queue)
	for _, r := range append(steals, queue...) {
		if granted[idOf(string(r.kv.Key))] {
			continue
		}
		snap.Pending = append(snap.Pending, elect.Pending{Name: name, Mode: r.val.Mode, PID: r.val.PID, Ticket: uint64(r.kv.CreateRevision), Since: r.val.Since, Command: r.val.Command, State: "running", Steal: r.val.Steal, Host: r.val.Host})
	}
}

// rpcErr prefers the context's cause to the RPC's report of it, and marks
// what etcd could not serve with elect.ErrUnavailable.
func rpcErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return unavailable(err)
}

// EndHolder revokes the lease of h's term of name: the grant marker whose
// pid, host and epoch are h's. It is for a holder known to be dead, whose
// term would otherwise last until its lease expires (leaderrun's waiters
// on the holder's host call it, once they have fenced its COMMAND). It
// ends every term and request of that holder's session, and does nothing
// when no such term exists any more.
func (l *Locker) EndHolder(ctx context.Context, name string, h elect.Holder) error {
	if err := elect.ValidateName(name); err != nil {
		return err
	}
	resp, err := l.cli.Get(ctx, l.base(name)+dirHeld, clientv3.WithPrefix())
	if err != nil {
		return rpcErr(ctx, err)
	}
	for _, kv := range resp.Kvs {
		var v held
		if json.Unmarshal(kv.Value, &v) != nil || v.PID != h.PID || v.Host != h.Host || v.Epoch != h.Epoch || kv.Lease == 0 {
			continue
		}
		if _, err := l.cli.Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return rpcErr(ctx, err)
		}
	}
	return nil
}
