package oslock

import "errors"

// ErrForeignEntry reports an entry of the lock directory that is not of
// the kind leaderrun makes under its name: a FIFO, socket, directory or
// device node where a regular file belongs, anything but a FIFO where a
// beacon belongs. Nothing was changed; the entry is not leaderrun's.
var ErrForeignEntry = errors.New("oslock: not an entry leaderrun made")

// foreignError is an ErrForeignEntry with its own message.
type foreignError struct{ msg string }

func (e foreignError) Error() string        { return e.msg }
func (e foreignError) Is(target error) bool { return target == ErrForeignEntry }
