package oslock

import (
	"io/fs"
	"os"
)

// TryLock tries to take a flock(2) lock on f without blocking: exclusive
// (LOCK_EX) or shared (LOCK_SH). It reports false, nil when another open file
// description holds a conflicting lock: contention is not an error. The lock
// belongs to f's open file description and ends when f is closed.
func TryLock(f *os.File, exclusive bool) (bool, error) {
	ok, err := tryLock(int(f.Fd()), exclusive)
	if err != nil {
		return false, &fs.PathError{Op: "flock", Path: f.Name(), Err: err}
	}
	return ok, nil
}

// Unlock drops f's lock without closing f.
func Unlock(f *os.File) error {
	if err := unlock(int(f.Fd())); err != nil {
		return &fs.PathError{Op: "flock", Path: f.Name(), Err: err}
	}
	return nil
}

// Drop gives up f's lock and closes f. Closing alone is not enough: the
// lock belongs to f's open file description, and a process that another
// goroutine forks meanwhile (COMMAND, a watchdog, os/exec's probe) holds a
// copy of every descriptor until its exec, so the lock would last until
// then. Drop returns Close's error.
func Drop(f *os.File) error {
	unlock(int(f.Fd())) // a file never locked, or closed already: no matter
	return f.Close()
}
