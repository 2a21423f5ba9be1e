package pg

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/leaderrun/leaderrun/elect"
)

// TestConnBrokeIsUnavailable: a statement whose connection broke under it
// (the server restarted: "unexpected EOF", as the 10-minute soak met while
// a session was opened) is the server being unavailable (exit 69), not an
// internal error (exit 70).
func TestConnBrokeIsUnavailable(t *testing.T) {
	for _, err := range []error{io.ErrUnexpectedEOF, io.EOF} {
		e := unavailable(fmt.Errorf("pg: opening a session: %w", err))
		if !errors.Is(e, elect.ErrUnavailable) {
			t.Errorf("%v: %v does not match elect.ErrUnavailable", err, e)
		}
	}
	if e := unavailable(errors.New("pg: some answer of the server")); errors.Is(e, elect.ErrUnavailable) {
		t.Errorf("an answer of the server taken for unavailability: %v", e)
	}
}
