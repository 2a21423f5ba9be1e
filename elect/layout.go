package elect

import "path/filepath"

// The lock directory's layout: every entry leaderrun makes in it, for one
// name, is named here and nowhere else (bus and cmd use the exported
// helpers). The package doc's "Files" section describes them for users.
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
//	                      that epoch hands the lock to out of turn (yieldto.go)
//	    .tmp-<pid>-<hex>  a ticket, beacon or inbox being made, before its link
//	<name>.sock           the leader's bus socket (package bus)
//	<name>.sock.tmp       the bus socket being bound, before its rename
//	<name>.cmd.<id>       a term marker of the leaderrun command: the term's
//	                      COMMAND, its process group and cgroup (package cmd)
//
// The state file's temporary copies, if any, also start with tmpPrefix.
const (
	lockSuffix    = ".lock"
	stateSuffix   = ".state"
	queueSuffix   = ".queue"
	beaconSuffix  = ".w"
	inboxSuffix   = ".m"
	stealMarker   = ".steal"
	handoffFile   = ".yield"
	tmpPrefix     = ".tmp-"
	socketSuffix  = ".sock"
	socketTemp    = ".sock.tmp"
	termMarkerSep = ".cmd."
)

// LockPath is the path of name's leadership lock file in dir: a
// flock(1) of that file excludes leaderrun and is excluded by it.
func LockPath(dir, name string) string { return filepath.Join(dir, LockFile(name)) }

// LockFile is the file name of name's leadership lock in the lock
// directory.
func LockFile(name string) string { return name + lockSuffix }

// SocketPath is where the leader of name serves its bus in dir.
func SocketPath(dir, name string) string { return filepath.Join(dir, SocketFile(name)) }

// SocketFile is the file name of name's bus socket in the lock directory.
func SocketFile(name string) string { return name + socketSuffix }

// SocketTempFile is the name the bus socket is bound under before it is
// renamed into place.
func SocketTempFile(name string) string { return name + socketTemp }

// TermMarkerPrefix is what the file names of name's term markers (package
// cmd) start with: the prefix, then the term's id.
func TermMarkerPrefix(name string) string { return name + termMarkerSep }
