package oslock

import (
	"context"
	"io/fs"
	"os"
	"sync"
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

// Wait takes f's flock, exclusive or shared, sleeping in the kernel until
// the lock is free, or returns ctx's cause once ctx ends. The wait is a
// blocking flock(2) on a goroutine of its own, on a duplicate of f's
// descriptor (the lock is the open file description's, so it is f's), so
// that no descriptor of f's is used after Wait returns. A wait given up
// takes the lock later only to drop it at once; until the lock is free
// that goroutine stays blocked in the kernel (for as long as the holder
// is stopped, say).
func Wait(ctx context.Context, f *os.File, exclusive bool) error {
	if ok, err := TryLock(f, exclusive); ok || err != nil {
		return err
	}
	fd, err := dupFD(int(f.Fd()))
	if err != nil {
		return &fs.PathError{Op: "dup", Path: f.Name(), Err: err}
	}
	var mu sync.Mutex
	abandoned := false
	done := make(chan error, 1)
	go func() {
		err := lockBlocking(fd, exclusive)
		mu.Lock()
		if abandoned && err == nil {
			unlock(fd)
		}
		mu.Unlock()
		closeFD(fd)
		done <- err
	}()
	var werr error
	select {
	case werr = <-done:
	case <-ctx.Done():
		mu.Lock()
		select {
		case werr = <-done: // taken just as ctx ended: it is ours
		default:
			abandoned = true
			werr = context.Cause(ctx)
		}
		mu.Unlock()
		if abandoned {
			return werr
		}
	}
	if werr != nil {
		return &fs.PathError{Op: "flock", Path: f.Name(), Err: werr}
	}
	return nil
}
