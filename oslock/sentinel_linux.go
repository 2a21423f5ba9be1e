package oslock

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// sentinel is the process's one inotify instance, made on first use and
// shared by every watch: a thousand names held cost one instance.
var sentinel struct {
	sync.Mutex
	f       *os.File
	err     error
	watches map[int32][]*Watch // by watch descriptor
	slot    int                // 1 + a descriptor kept for the instance, or 0
}

// reserveSlot keeps a low descriptor (on /dev/null) for the instance the
// process may make later: made then, the instance takes its number, below
// every lock, ticket, beacon and socket opened since. The kernel lets go
// of a dying process's descriptors from the highest number down, and an
// instance's teardown waits for an RCU grace period (about 10ms); what is
// numbered above it is let go before that wait, at no cost to the grant.
// It costs one descriptor, which is not a scarce resource.
func reserveSlot() {
	sentinel.Lock()
	defer sentinel.Unlock()
	if sentinel.f != nil || sentinel.err != nil || sentinel.slot != 0 {
		return
	}
	if fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		sentinel.slot = fd + 1
	}
}

func startSentinel() error {
	if sentinel.f != nil || sentinel.err != nil {
		return sentinel.err
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		sentinel.err = fmt.Errorf("oslock: inotify_init1: %w", err)
		return sentinel.err
	}
	// Never the user's last instance: their next editor or file watcher
	// would fail. A second one must be to be had too; it is given back
	// at once (off this path: closing an instance waits for an RCU grace
	// period).
	spare, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		unix.Close(fd)
		sentinel.err = fmt.Errorf("oslock: leaving the user's last inotify instances (fs.inotify.max_user_instances) to others: %w", err)
		return sentinel.err
	}
	go unix.Close(spare)
	if slot := sentinel.slot - 1; slot >= 0 {
		sentinel.slot = 0
		if unix.Dup3(fd, slot, unix.O_CLOEXEC) == nil {
			unix.Close(fd)
			fd = slot
		} else {
			unix.Close(slot)
		}
	}
	sentinel.f = os.NewFile(uintptr(fd), "inotify")
	sentinel.watches = map[int32][]*Watch{}
	go readSentinel(sentinel.f)
	return nil
}

func readSentinel(f *os.File) {
	buf := make([]byte, 16<<10)
	for {
		n, err := f.Read(buf)
		if err != nil {
			return
		}
		var fire []*Watch
		overflow := false
		sentinel.Lock()
		for b := buf[:n]; len(b) >= unix.SizeofInotifyEvent; {
			wd := int32(binary.NativeEndian.Uint32(b[0:]))
			mask := binary.NativeEndian.Uint32(b[4:])
			size := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(b[12:]))
			if mask&unix.IN_Q_OVERFLOW != 0 {
				overflow = true
			}
			if size > len(b) {
				break
			}
			child := string(bytes.TrimRight(b[unix.SizeofInotifyEvent:size], "\x00"))
			for _, w := range sentinel.watches[wd] {
				if w.wants(mask, child) {
					fire = append(fire, w)
				}
			}
			b = b[size:]
		}
		if overflow {
			for _, ws := range sentinel.watches {
				fire = append(fire, ws...)
			}
		}
		sentinel.Unlock()
		for _, w := range fire {
			w.poke()
		}
	}
}

// selfEvents are what a Watch of a path reports; childEvents what a Watch
// for a name in a directory does. The end of a watch (IN_IGNORED: the
// file is gone) reaches both.
const (
	selfEvents  = unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
	childEvents = unix.IN_CREATE | unix.IN_MOVED_TO
)

// wants reports whether an event of mask, about the directory entry child
// ("" for the watched file itself), concerns w. Watches of one file share
// its watch descriptor and the union of their masks.
func (w *Watch) wants(mask uint32, child string) bool {
	if mask&(unix.IN_IGNORED|unix.IN_UNMOUNT) != 0 {
		return true
	}
	return mask&w.mask != 0 && (child == w.child || w.child == anyChild)
}

func watchPath(path string) (*Watch, error) { return addWatch(path, "", selfEvents) }

func watchChild(dir, name string) (*Watch, error) { return addWatch(dir, name, childEvents) }

func addWatch(path, child string, mask uint32) (*Watch, error) {
	sentinel.Lock()
	defer sentinel.Unlock()
	if err := startSentinel(); err != nil {
		return nil, err
	}
	rc, err := sentinel.f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var wd int
	var werr error
	rc.Control(func(fd uintptr) {
		wd, werr = unix.InotifyAddWatch(int(fd), path, unix.IN_DONT_FOLLOW|unix.IN_MASK_ADD|mask)
	})
	if werr != nil {
		return nil, fmt.Errorf("oslock: inotify_add_watch %s: %w", path, werr)
	}
	w := &Watch{wd: int32(wd), mask: mask, child: child, C: make(chan struct{}, 1)}
	sentinel.watches[w.wd] = append(sentinel.watches[w.wd], w)
	return w, nil
}

func (w *Watch) stop() {
	sentinel.Lock()
	defer sentinel.Unlock()
	ws := sentinel.watches[w.wd]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) > 0 {
		sentinel.watches[w.wd] = ws
		return
	}
	delete(sentinel.watches, w.wd)
	if rc, err := sentinel.f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.InotifyRmWatch(int(fd), uint32(w.wd)) })
	}
}

func sentinelFD() int {
	sentinel.Lock()
	defer sentinel.Unlock()
	if sentinel.f == nil {
		return -1
	}
	return int(sentinel.f.Fd())
}

// above returns f, or a duplicate of it numbered above min (f is then
// closed): the kernel tears down a dying process's descriptors from the
// highest number down, so a lock above the inotify instance is dropped
// before the instance's slow teardown (an RCU grace period) begins.
func above(f *os.File, min int) (*os.File, error) {
	if min < 0 || int(f.Fd()) > min {
		return f, nil
	}
	// Go's poller may hold a file registered; a duplicate is registered
	// afresh by os.NewFile, and the original is closed once unused.
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, min+1)
	if err != nil {
		return f, errors.Join(errors.New("oslock: dup above the inotify instance"), err)
	}
	g := os.NewFile(uintptr(fd), f.Name())
	f.Close()
	return g, nil
}
