package oslock

// WatchEntries starts a Watch of the directory path's entries: C receives
// a value when an entry is created or renamed into it, and with writes
// also when one is removed, renamed away or written, and when the
// directory itself is removed or moved. It shares the process's one
// inotify instance with every other Watch (Linux only; elsewhere
// [ErrUnsupported]). Watches of one directory share one kernel watch whose
// events are the union of theirs, so a Watch may wake for another's
// events: the receiver always looks for itself.
func WatchEntries(path string, writes bool) (*Watch, error) { return watchEntries(path, writes) }
