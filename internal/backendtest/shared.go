//go:build unix

package backendtest

import (
	"sync"
	"testing"
)

// Shared is one server (a PostgreSQL, an etcd cluster) for all the tests
// of a test binary that do not harm it: started by the first Get, closed
// by Close from TestMain once the tests have run.
type Shared[T interface{ Close() }] struct {
	once    sync.Once
	v       T
	err     error
	started bool
}

// Get returns the server, starting it with start on first use; a start
// that failed fails tb (and every later Get).
func (s *Shared[T]) Get(tb testing.TB, start func() (T, error)) T {
	tb.Helper()
	s.once.Do(func() {
		s.v, s.err = start()
		s.started = s.err == nil
	})
	if s.err != nil {
		tb.Fatal(s.err)
	}
	return s.v
}

// Close closes the server if it was started.
func (s *Shared[T]) Close() {
	if s.started {
		s.v.Close()
	}
}
