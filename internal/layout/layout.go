// Package layout names the entries of the flock backend's lock directory:
// every file leaderrun makes in it, for one name, is named here and
// nowhere else. elect (the flock backend) makes the lock, the state and
// the queue; bus binds the socket; supervise writes the term markers; the
// command line prints the lock file's path for flock(1). elect's package
// doc ("Files") describes them for users. No other backend has a lock
// directory: these are not part of elect's contract.
//
//	<name>.lock           the leadership lock: holding flock(2) on it is what
//	                      leading means (so flock(1) on it interoperates); never
//	                      removed; holds a copy of the last epoch (the floor)
//	<name>.state          the ticket counter and the last epoch, rewritten under
//	                      its own flock
//	<name>.queue/         the line of requests:
//	    t<20 digits>      a ticket: its owner's record, flocked while it lives
//	    s<20 digits>      a steal's ticket (sorts before every t ticket)
//	    <ticket>.w        its beacon: a FIFO its owner holds open; successors
//	                      wait for it to hang up
//	    <ticket>.m        its inbox: a FIFO only its owner reads; stealers write
//	                      "S<epoch>" into it
//	    .steal            exists while a steal may be queued
//	    .yield            "Y <epoch> <hand-over id>": the waiter the leader of
//	                      that epoch hands the lock to out of turn
//	    .tmp-<pid>-<hex>  a ticket, beacon or inbox being made, before its link
//	<name>.sock           the leader's bus socket (package bus)
//	<name>.sock.tmp       the bus socket being bound, before its rename
//	<name>.cmd.<id>       a term marker of the leaderrun command: the term's
//	                      COMMAND, its process group and cgroup (package
//	                      supervise)
//
// The state file's temporary copies, if any, also start with TmpPrefix.
package layout

import "path/filepath"

// The suffixes and names of the lock directory's entries (see the package
// doc).
const (
	LockSuffix    = ".lock"
	StateSuffix   = ".state"
	QueueSuffix   = ".queue"
	BeaconSuffix  = ".w"
	InboxSuffix   = ".m"
	StealMarker   = ".steal"
	HandoffFile   = ".yield"
	TmpPrefix     = ".tmp-"
	SocketSuffix  = ".sock"
	SocketTemp    = ".sock.tmp"
	TermMarkerSep = ".cmd."
)

// LockPath is the path of name's leadership lock file in dir: a
// flock(1) of that file excludes leaderrun and is excluded by it.
func LockPath(dir, name string) string { return filepath.Join(dir, LockFile(name)) }

// LockFile is the file name of name's leadership lock in the lock
// directory.
func LockFile(name string) string { return name + LockSuffix }

// SocketPath is where the leader of name serves its bus in dir.
func SocketPath(dir, name string) string { return filepath.Join(dir, SocketFile(name)) }

// SocketFile is the file name of name's bus socket in the lock directory.
func SocketFile(name string) string { return name + SocketSuffix }

// SocketTempFile is the name the bus socket is bound under before it is
// renamed into place.
func SocketTempFile(name string) string { return name + SocketTemp }

// TermMarkerPrefix is what the file names of name's term markers (package
// supervise) start with: the prefix, then the term's id.
func TermMarkerPrefix(name string) string { return name + TermMarkerSep }
