//go:build !linux

package supervise

import "io"

type spare struct {
	id    string
	cg    *termCgroup
	taken bool
}

func newSpare([]string, []string, io.Writer) (*Spare, error) { return nil, ErrNoSpare }

func (s *spare) close()     {}
func (s *spare) take() bool { return false }

func (t *Term) startSpare(*Spare, []string, []string, io.Writer) (*Command, error) {
	return nil, ErrNoSpare
}
