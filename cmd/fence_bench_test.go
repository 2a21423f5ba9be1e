package cmd

import "testing"

func BenchmarkFence(b *testing.B) {
	for b.Loop() {
		fenceOrphans("/nonexistent", "x", true)
	}
}
