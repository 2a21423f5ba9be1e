package cmd

import (
	"context"
	"errors"
	"testing"

	"github.com/leaderrun/leaderrun/elect"
)

// TestWithBackend checks that every command opens the lock directory
// through the Opener given to New, with the flags' settings.
func TestWithBackend(t *testing.T) {
	errOpen := errors.New("backend refused")
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--name", "x", "--", "true"},
		{"status"},
		{"who", "x"},
		{"publish", "x", "hello"},
		{"subscribe", "x"},
		{"lockfile", "x"},
	} {
		var got []elect.Config
		app := New(WithBackend(func(c elect.Config) (Backend, error) {
			got = append(got, c)
			return nil, errOpen
		}))
		err := app.App.RunContext(context.Background(), append([]string{"leaderrun", "--dir", dir, "--group-shared"}, args...))
		if !errors.Is(err, errOpen) {
			t.Errorf("%v: err = %v, want the backend's", args, err)
		}
		if len(got) == 0 || got[0].Dir != dir || !got[0].GroupShared {
			t.Errorf("%v: opened with %+v, want Dir %s and GroupShared", args, got, dir)
		}
	}
}
