package cmd

import (
	"context"
	"testing"
)

// BenchmarkFence compares, in one run, what a new leader pays after a
// crashed term whose COMMAND is already dead: the /proc scan alone (the
// fallback, and all the fence did before term markers recorded COMMAND),
// and the whole new fence of a dead term with and without a cgroup.
func BenchmarkFence(b *testing.B) {
	ctx := context.Background()
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			fenceOrphans(ctx, "00000000000000000000000000000000", 0)
		}
	})
	dead := func(b *testing.B, cgroup bool) *termRecord {
		r := &termRecord{id: "0123456789abcdef0123456789abcdef", wpid: 1 << 22, commandStarted: true, cpid: 1<<22 + 1, pgid: 1<<22 + 1}
		if cgroup {
			cg := newTermCgroup(r.id)
			if cg == nil {
				b.Skip("no writable cgroup v2 here")
			}
			r.cgroup = cg.path
			cg.dir.Close()
		}
		return r
	}
	b.Run("cgroup", func(b *testing.B) {
		r := dead(b, true)
		for b.Loop() {
			// The cgroup is removed by the first fence; later ones
			// find it gone, as a second fencer of one term does.
			fenceTerm(ctx, r)
		}
	})
	b.Run("nocgroup", func(b *testing.B) {
		r := dead(b, false)
		for b.Loop() {
			fenceTerm(ctx, r)
		}
	})
}
