package cmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// foreignOpen reports whether err is an open of an entry of the lock
// directory that found something leaderrun never makes under that name:
// a socket (ENXIO) or a directory (EISDIR) where a file belongs, or a
// file where a directory (NAME.queue) belongs (ENOTDIR, with the parent a
// directory: not a lock directory path that runs through a file). Such an
// entry is foreign content (65), like a garbage state file; the errors
// that say so themselves carry oslock.ErrForeignEntry or
// oslock.ErrSymlink.
func foreignOpen(err error) (*fs.PathError, bool) {
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Op != "open" {
		return nil, false
	}
	switch {
	case errors.Is(pe.Err, syscall.ENXIO), errors.Is(pe.Err, syscall.EISDIR):
		return pe, true
	case errors.Is(pe.Err, syscall.ENOTDIR):
		fi, err := os.Lstat(pe.Path)
		parent, perr := os.Stat(filepath.Dir(pe.Path))
		return pe, err == nil && !fi.IsDir() && perr == nil && parent.IsDir()
	}
	return nil, false
}

// foreignMessage says what a foreignOpen error found, and what to do.
func foreignMessage(pe *fs.PathError) string {
	want := "regular file"
	if errors.Is(pe.Err, syscall.ENOTDIR) {
		want = "directory"
	}
	return fmt.Sprintf("leaderrun: %s is %s, where leaderrun keeps a %s: it did not make it, and nothing was changed; remove it (if no process is using it)", pe.Path, kindOf(pe.Path), want)
}

// kindOf names the type of the file at path, with its article.
func kindOf(path string) string {
	fi, err := os.Lstat(path)
	if err != nil {
		return "not a file"
	}
	switch m := fi.Mode(); {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "a regular file"
}
