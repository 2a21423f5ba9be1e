package cmd

import (
	"context"

	"github.com/leaderrun/leaderrun/bus"
	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/supervise"
)

// watchLocalHolder runs while this instance waits in line, for a backend
// that carries its own bus and can end a dead holder's term (a
// HolderEnder, etcd): it follows the leader of name, and while the leader
// is a leaderrun of lk's lock directory it outlives it
// (supervise.OutliveHolder), ending its term in the backend should it die
// without. Until ctx ends.
func watchLocalHolder(ctx context.Context, lk *opened, name string) {
	he, b, ok := lk.holderEnder()
	if !ok {
		return
	}
	endWait := func() {}
	defer func() { endWait() }()
	onEvents(ctx, b, name, BusOptions{WaitForLeader: true, PublishOnly: true}, func(ev bus.Event) {
		if ev.Kind != bus.EventLeader {
			return
		}
		endWait() // a new leader: the last one's wait is over
		wctx, cancel := context.WithCancel(ctx)
		endWait = cancel
		l := ev.Leader
		go supervise.OutliveHolder(wctx, lk.Dir(), name, l.PID, func(ctx context.Context) error {
			return he.EndHolder(ctx, name, elect.Holder{Name: name, PID: l.PID, Host: l.Host, Epoch: l.Epoch})
		})
	})
}
