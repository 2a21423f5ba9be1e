package supervise

import (
	"errors"
	"io"
)

// A Spare is COMMAND's process made ahead, while its supervisor waits in
// line: a shell asleep in a read, already in COMMAND's process group, in
// the cgroup of the term to come, with COMMAND's descriptors and its
// environment as far as it is known before the grant. Begin the term with it, and
// Term.Start hands it COMMAND's argv and environment (epoch and term id
// included) once the term is marked; it execs COMMAND at once. So the time
// between a grant and COMMAND's exec holds no fork and no cgroup made. A
// Spare never runs COMMAND before that: closed, or its supervisor gone
// (even by SIGKILL), it exits without running anything, and Close removes
// its cgroup. It costs one sleeping process per waiter (about 1 MB
// resident on Linux).
type Spare struct{ spare }

// ErrNoSpare is NewSpare's error where COMMAND's process cannot be made
// ahead: not Linux, no /bin/sh, COMMAND gets the terminal (its process group must not
// take the terminal from a supervisor that still waits), or its standard
// output is not a file. Start COMMAND as usual then.
var ErrNoSpare = errors.New("COMMAND's process cannot be made ahead here")

// NewSpare makes COMMAND's process ahead (argv[0] resolved as Start
// resolves it), with environment env, standard input and error this
// process's and standard output stdout, which must be an *os.File. Start
// passes on what its environment adds or changes (the epoch, the term
// id); one that removes a variable, or a value with a newline, makes it
// fork COMMAND instead. It returns once the process
// is forked, without waiting for it to run: a term begun before it runs
// does not use it.
func NewSpare(argv, env []string, stdout io.Writer) (*Spare, error) {
	return newSpare(argv, env, stdout)
}

// Close ends a spare that no term used: its process exits without running
// anything, soon after (Close does not wait), and its cgroup is removed
// once it has. Closing a spare that a term took does nothing. A nil
// *Spare does nothing.
func (s *Spare) Close() {
	if s != nil {
		s.close()
	}
}
