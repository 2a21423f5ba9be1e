package oslock

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LockTable reads /proc/locks and returns the flock holders of every locked
// inode. Reading it takes no lock and wakes nobody.
func LockTable() (map[FileID][]LockHolder, error) {
	f, err := os.Open("/proc/locks")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	table := make(map[FileID][]LockHolder)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 08:01:56789 0 EOF"; blocked
		// waiters have "->" after the index and are skipped.
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil {
			continue
		}
		dev := strings.Split(fields[5], ":")
		if len(dev) != 3 {
			continue
		}
		maj, err1 := strconv.ParseUint(dev[0], 16, 32)
		min, err2 := strconv.ParseUint(dev[1], 16, 32)
		ino, err3 := strconv.ParseUint(dev[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		id := FileID{Dev: unix.Mkdev(uint32(maj), uint32(min)), Ino: ino}
		table[id] = append(table[id], LockHolder{PID: pid, Exclusive: fields[3] == "WRITE"})
	}
	return table, sc.Err()
}

// StateOf reports whether pid runs, is stopped, or is gone.
func StateOf(pid int) ProcState {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ProcGone
	}
	// The state follows the command name, which is in parentheses and may
	// itself contain ") ".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return ProcUnknown
	}
	switch b[i+2] {
	case 'T', 't':
		return ProcStopped
	case 'Z', 'X', 'x':
		return ProcGone
	}
	return ProcRunning
}

// Cmdline returns the command line of pid, or nil.
func Cmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// UIDOf returns the real uid of pid, or -1.
func UIDOf(pid int) int {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid), &st); err != nil {
		return -1
	}
	return int(st.Uid)
}

func kill(pid int) error { return unix.Kill(pid, unix.SIGKILL) }
