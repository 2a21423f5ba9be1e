package cmd

import (
	"fmt"
	"os"
	"strconv"
	"sync"
)

// Readiness for systemd (Type=notify): with NOTIFY_SOCKET set, leaderrun
// tells the service manager what it does, in sd_notify(3)'s protocol, one
// datagram per message to the socket NOTIFY_SOCKET names (a path, or an
// abstract name written with a leading @):
//
//	STATUS=waiting #N for NAME, led by pid P on HOST   while in line
//	STATUS=leading NAME, epoch E, then READY=1         when it starts leading
//	STOPPING=1                                         when it stops
//
// --notify-ready says when READY=1 goes: when this instance leads (lead,
// the default: the unit is "active" only on the leader, and a standby
// stays "activating"), at once (start: every instance is "active" and
// the STATUS line says which leads), or never, passing NOTIFY_SOCKET on
// to COMMAND, which reports its own readiness (command; the unit needs
// NotifyAccess=all, since COMMAND is not the main process). In the other
// modes COMMAND does not get NOTIFY_SOCKET.

// Readiness modes of --notify-ready.
const (
	readyLead    = "lead"
	readyStart   = "start"
	readyCommand = "command"
)

// notifier sends sd_notify messages; nil (no NOTIFY_SOCKET) sends nothing.
type notifier struct {
	addr    string
	mode    string
	mu      sync.Mutex
	last    string // the last STATUS sent, not repeated
	stopped bool
}

// newNotifier is the notifier of NOTIFY_SOCKET, or nil when it is unset
// or names no unix socket (vsock: addresses are not supported).
func newNotifier(mode string) *notifier {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" || addr[0] != '/' && addr[0] != '@' {
		return nil
	}
	return &notifier{addr: addr, mode: mode}
}

func (n *notifier) send(msg string) {
	if n == nil {
		return
	}
	// Best effort, as sd_notify: a service manager that went away, or a
	// full socket buffer, must not stop the election.
	_ = sdNotify(n.addr, msg)
}

// started is called once the lock directory is open.
func (n *notifier) started() {
	if n != nil && n.mode == readyStart {
		n.send("READY=1")
	}
}

// status sends STATUS=line unless it was the last one sent.
func (n *notifier) status(line string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if line == n.last || n.stopped {
		return
	}
	n.last = line
	n.send("STATUS=" + line)
}

// waiting reports this instance's place in line and who leads.
func (n *notifier) waiting(name string, pos int, holderPID int, host string) {
	if n == nil {
		return
	}
	line := "waiting"
	if pos > 0 {
		line += " #" + strconv.Itoa(pos)
	}
	line += " for " + name
	if holderPID > 0 {
		if host == "" {
			host, _ = os.Hostname()
		}
		line += fmt.Sprintf(", led by pid %d on %s", holderPID, host)
	}
	n.status(line)
}

// leading reports the start of a term, and readiness in lead mode.
func (n *notifier) leading(name string, epoch uint64) {
	if n == nil {
		return
	}
	n.status(fmt.Sprintf("leading %s, epoch %d", name, epoch))
	if n.mode == readyLead {
		n.send("READY=1")
	}
}

// stopping sends STOPPING=1, once.
func (n *notifier) stopping() {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return
	}
	n.stopped = true
	n.send("STOPPING=1")
}

// passOn reports whether COMMAND gets NOTIFY_SOCKET.
func (n *notifier) passOn() bool { return n == nil || n.mode == readyCommand }
