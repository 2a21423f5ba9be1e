//go:build !linux

package bus

import (
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// dirWatch wakes a waiting client when a leader's socket appears. A leader
// renames its socket into place once it accepts (see Server.listen), which
// fsnotify reports as Create. Off Linux fsnotify uses kqueue, which costs
// the user no scarce instance.
type dirWatch struct {
	w    *fsnotify.Watcher
	sig  chan struct{} // a value when the socket may have appeared
	done chan struct{}
}

func watchFor(dir, file string) (*dirWatch, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, err
	}
	d := &dirWatch{w: w, sig: make(chan struct{}, 1), done: make(chan struct{})}
	go d.loop(file)
	return d, nil
}

func (d *dirWatch) loop(file string) {
	defer close(d.done)
	for {
		select {
		case ev, ok := <-d.w.Events:
			if !ok {
				return
			}
			if ev.Has(fsnotify.Create) && filepath.Base(ev.Name) == file {
				d.signal()
			}
		case _, ok := <-d.w.Errors:
			if !ok {
				return
			}
			// An overflowed queue may have lost the event we wait for:
			// have the client look once more.
			d.signal()
		}
	}
}

func (d *dirWatch) signal() {
	select {
	case d.sig <- struct{}{}:
	default:
	}
}

func (d *dirWatch) close() {
	if d == nil {
		return
	}
	d.w.Close()
	<-d.done
}
