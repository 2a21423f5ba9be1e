package oslock

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

func sysLockTable() (map[FileID][]LockHolder, error) {
	table := make(map[FileID][]LockHolder)
	err := scanFlocks(func(blocked bool, id FileID, h LockHolder) {
		if !blocked {
			table[id] = append(table[id], h)
		}
	})
	return table, err
}

func sysFlockWaiters() (map[int]bool, error) {
	waiters := make(map[int]bool)
	err := scanFlocks(func(blocked bool, _ FileID, h LockHolder) {
		if blocked {
			waiters[h.PID] = true
		}
	})
	return waiters, err
}

// scanFlocks calls fn for each flock line of /proc/locks:
// "1: FLOCK  ADVISORY  WRITE 1234 08:01:56789 0 EOF" for a holder, with
// "->" after the index for a blocked waiter.
func scanFlocks(fn func(blocked bool, id FileID, h LockHolder)) error {
	f, err := os.Open("/proc/locks")
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		blocked := len(fields) > 1 && fields[1] == "->"
		if blocked {
			fields = fields[1:]
		}
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
		fn(blocked, id, LockHolder{PID: pid, Exclusive: fields[3] == "WRITE"})
	}
	return sc.Err()
}

func sysStateOf(pid int) ProcState {
	b, err := readStat(pid)
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
		f := strings.Fields(string(b[i+2:]))
		if len(f) < 18 {
			return ProcGone
		}
		if n, err := strconv.Atoi(f[17]); err == nil && n > 1 {
			return ProcRunning // threads still exiting
		}
		return ProcGone
	}
	return ProcRunning
}

// readStat reads /proc/PID/stat: with one open, read and close into a
// buffer that fits the usual line (every release and stall check reads
// one or two), and through os.ReadFile when it is longer.
func readStat(pid int) ([]byte, error) {
	var path [32]byte
	p := strconv.AppendInt(append(path[:0], "/proc/"...), int64(pid), 10)
	p = append(p, "/stat"...)
	fd, err := unix.Open(string(p), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 1024)
	n, err := readFull(fd, buf)
	unix.Close(fd)
	if err != nil {
		return nil, err
	}
	if n < len(buf) {
		return buf[:n], nil
	}
	return os.ReadFile(string(p))
}

// readFull reads fd until buf is full or end of file.
func readFull(fd int, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, nil
}

func sysCmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

func sysUIDOf(pid int) int {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid), &st); err != nil {
		return -1
	}
	return int(st.Uid)
}

func kill(pid int) error { return unix.Kill(pid, unix.SIGKILL) }

func sysWaitGone(ctx context.Context, pid int) error {
	if StateOf(pid) == ProcGone {
		return nil
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err == unix.ESRCH {
		return nil
	}
	if err != nil {
		return pollGone(ctx, pid) // before Linux 5.10
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return pollGone(ctx, pid)
	}
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Now()) })
	defer stop()
	checked := false
	err = rc.Read(func(uintptr) bool {
		// Once readable, the pidfd stays readable: the second call
		// means the process has exited.
		if checked {
			return true
		}
		checked = true
		return StateOf(pid) == ProcGone
	})
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}
