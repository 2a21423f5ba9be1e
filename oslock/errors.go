package oslock

import "errors"

// Sentinel errors, checked with errors.Is.
var (
	// ErrUnsupported reports a platform or filesystem on which flock
	// cannot be relied upon. It matches errors.ErrUnsupported too.
	ErrUnsupported = unsupportedError{}
	// ErrInsecureDir reports a lock directory that others could tamper
	// with: a symbolic link, owned by another user, or writable by others.
	ErrInsecureDir = errors.New("oslock: insecure lock directory")
	// ErrSymlink reports a symbolic link where a regular file or directory
	// was expected inside the lock directory.
	ErrSymlink = errors.New("oslock: refusing to follow a symbolic link")
)

type unsupportedError struct{}

func (unsupportedError) Error() string { return "oslock: file locking is not supported here" }

func (unsupportedError) Is(target error) bool { return target == errors.ErrUnsupported }

// explained is an error whose message already says what happened and what
// to do, and which matches err (such as fs.ErrNotExist) with errors.Is.
type explained struct {
	msg string
	err error
}

func (e explained) Error() string { return e.msg }

func (e explained) Unwrap() error { return e.err }
