package oslock

import "os"

// A tag is a small value kept with a file's inode rather than in its
// content (a user extended attribute on Linux), so that truncating or
// rewriting the file leaves it: flock(1)'s idiom 9>FILE truncates the
// file it locks. Where tags are not supported (other systems, or a
// filesystem without user attributes) SetTag does nothing and Tag reports
// false.

// SetTag stores value under key on the open file f, best effort.
func SetTag(f *os.File, key string, value []byte) { sysSetTag(f, key, value) }

// Tag returns the value stored under key on f, if any.
func Tag(f *os.File, key string) ([]byte, bool) { return sysTag(f, key) }
