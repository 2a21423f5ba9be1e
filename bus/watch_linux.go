package bus

import "github.com/leaderrun/leaderrun/oslock"

// dirWatch wakes a waiting client when a leader's socket appears. A leader
// renames its socket into place once it accepts (see Server.listen), which
// inotify reports as IN_MOVED_TO. The watch shares the process's one
// inotify instance (oslock.WatchChild), so ending it is cheap: closing an
// instance of its own would wait for an RCU grace period (about 10ms) on
// the way to the new leader's EventLeader.
type dirWatch struct {
	w   *oslock.Watch
	sig <-chan struct{} // a value when the socket may have appeared
}

func watchFor(dir, file string) (*dirWatch, error) {
	w, err := oslock.WatchChild(dir, file)
	if err != nil {
		return nil, err
	}
	return &dirWatch{w: w, sig: w.C}, nil
}

func (d *dirWatch) close() {
	if d != nil {
		d.w.Stop()
	}
}
