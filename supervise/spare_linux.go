package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A spare is /bin/sh running spareScript, with COMMAND's argv as its
// arguments and COMMAND's environment as known while waiting, and a socket
// on the first descriptor from 3 to 9 that the supervisor did not inherit
// open (those it did pass on to COMMAND unchanged, as they do through
// Start; the shell names descriptors up to 9 only). It writes
// "r" once it runs; at the grant it reads the variables that differ now
// (the epoch, the term id), one NAME=VALUE per line, exports them and, on
// "go", closes the socket and execs COMMAND: a small single-threaded
// process execs in a fraction of the time a fork of the supervisor takes
// (BenchmarkStart). End of file first (Close, or the supervisor gone)
// makes it exit 0 without running anything.
const spareScript = `echo r >&%[1]d || exit 0
while IFS= read -r kv <&%[1]d; do
	case $kv in go) exec %[1]d<&-; exec "$@";; esac
	export "$kv" || exit 0
done
exit 0`

type spare struct {
	c      *Command // the spare's process; COMMAND's once it execs
	sock   *os.File // the supervisor's end of the socket
	ready  chan struct{}
	argv   []string
	env    []string // COMMAND's environment as the spare has it
	stdout io.Writer
	id     string      // the term id it was made for
	cg     *termCgroup // that term's cgroup, or nil; a term that takes the spare takes it
	once   sync.Once
	taken  bool // by a term
}

func newSpare(argv, env []string, stdout io.Writer) (*Spare, error) {
	out, ok := stdout.(*os.File)
	if !ok || len(argv) == 0 || !fenceSupported {
		return nil, ErrNoSpare
	}
	if _, tty := foregroundTTY(); tty {
		return nil, ErrNoSpare
	}
	path, err := LookPath(argv[0])
	if err != nil {
		return nil, err
	}
	args := append([]string{"sh", "-c", "", "leaderrun-spare"}, argv...)
	if _, set := os.LookupEnv("PATH"); !set && !strings.Contains(argv[0], "/") {
		args[4] = path // found on the default search path, which sh does not know
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fds[1])
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		return nil, err
	}
	sock := os.NewFile(uintptr(fds[0]), "spare")
	files := append([]uintptr{os.Stdin.Fd(), out.Fd(), os.Stderr.Fd()}, inheritedFDs()...)
	n := 3 // the socket's descriptor: the first free one, for the shell names 0 to 9 only
	for n < len(files) && files[n] != closedFD {
		n++
	}
	if n > 9 {
		sock.Close()
		return nil, ErrNoSpare
	}
	for len(files) <= n {
		files = append(files, closedFD)
	}
	files[n] = uintptr(fds[1])
	args[2] = fmt.Sprintf(spareScript, n)
	s := &Spare{spare{sock: sock, ready: make(chan struct{}), argv: argv, env: env, stdout: stdout, id: newTermID()}}
	s.cg = newTermCgroup(s.id)
	for {
		sys := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if s.cg != nil {
			// Cloned into the cgroup: moving a process there later
			// costs milliseconds (cgroup.procs takes a global lock).
			sys.UseCgroupFD, sys.CgroupFD = true, int(s.cg.dir.Fd())
		}
		s.c = &Command{done: make(chan struct{}), stopped: make(chan struct{}, 1)}
		err = forkAndWait(s.c, args, &syscall.ProcAttr{Env: env, Files: files, Sys: sys})
		if err == nil {
			break
		}
		if s.cg == nil {
			sock.Close()
			return nil, err
		}
		s.cg.remove(context.Background()) // not allowed to populate it: without
		s.cg = nil
	}
	go func() {
		var b [1]byte
		if n, _ := sock.Read(b[:]); n == 1 && b[0] == 'r' {
			close(s.ready)
		}
	}()
	return s, nil
}

// usable reports whether the spare runs and waits for COMMAND.
func (s *spare) usable() bool {
	select {
	case <-s.ready:
		return !s.c.Exited()
	default:
		return false
	}
}

// forkAndWait starts the spare as startAndWait starts COMMAND (Pdeathsig
// on a thread kept for the child's life), with syscall.ForkExec: no os/exec
// pipes or probe child, and descriptors passed by number.
func forkAndWait(c *Command, args []string, attr *syscall.ProcAttr) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		pid, err := syscall.ForkExec("/bin/sh", args, attr)
		if err != nil {
			started <- err
			return
		}
		p, err := os.FindProcess(pid)
		if err != nil { // not on Linux: FindProcess always finds
			started <- err
			return
		}
		c.cmd = &exec.Cmd{Path: "/bin/sh", Args: args, Process: p}
		c.pgid = pid
		c.started = time.Now()
		started <- nil
		ps, _ := p.Wait()
		c.cmd.ProcessState = ps
		close(c.done)
	}()
	return <-started
}

// inheritedFDs are the descriptors above 2 that this process has open
// without close-on-exec (inherited from its parent: a socket systemd
// passes, a shell's 3>file), each at its own number, with -1 for the gaps:
// COMMAND gets them from a spare as it does from Start.
// closedFD in syscall.ProcAttr.Files closes that descriptor in the child.
const closedFD = ^uintptr(0)

var inheritedFDs = sync.OnceValue(func() []uintptr {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	var open []int
	top := 2
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			open = append(open, fd)
			top = max(top, fd)
		}
	}
	out := make([]uintptr, top-2)
	for i := range out {
		out[i] = closedFD
	}
	for _, fd := range open {
		out[fd-3] = uintptr(fd)
	}
	return out
})

// close tells an unused spare to exit; it does not wait (a spare still
// starting takes a few milliseconds to read the end of file): the
// goroutine that started it reaps it, and its cgroup is removed then.
func (s *spare) close() {
	s.once.Do(func() {
		s.sock.Close()
		if cg := s.cg; cg != nil && !s.taken {
			go func() {
				<-s.c.done
				ctx, cancel := context.WithTimeout(context.Background(), fenceBudget)
				defer cancel()
				cg.remove(ctx)
			}()
		}
	})
}

var errSpareGone = errors.New("the spare process is gone")

// take gives the spare to the term t begins: its id and cgroup become the
// term's. It reports false, closing the spare, when it does not run (yet).
func (s *spare) take() bool {
	if !s.usable() {
		s.close()
		return false
	}
	s.taken = true
	return true
}

// startSpare hands COMMAND to the spare the term took, once the term's
// marker records it: the spare exports what env changed and execs COMMAND.
func (t *Term) startSpare(s *Spare, argv, env []string, stdout io.Writer) (*Command, error) {
	msg, ok := spareMessage(s.env, env)
	if !ok || stdout != s.stdout || !slices.Equal(argv, s.argv) || s.c.Exited() {
		s.close()
		return nil, errSpareGone
	}
	c := s.c
	t.record(c)
	_, err := s.sock.Write(msg)
	s.once.Do(func() { s.sock.Close() })
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errSpareGone, err)
	}
	c.started = time.Now()
	return c, nil
}

// spareMessage is what the spare reads to turn environment was into now:
// a NAME=VALUE line for each variable added or changed, then "go". It
// reports false where the spare cannot do it (a variable removed, a name
// the shell cannot export, a value with a newline).
func spareMessage(was, now []string) ([]byte, bool) {
	old := make(map[string]string, len(was))
	for _, kv := range was {
		k, v, _ := strings.Cut(kv, "=")
		old[k] = v
	}
	var msg []byte
	seen := 0
	for _, kv := range now {
		k, v, _ := strings.Cut(kv, "=")
		if ov, ok := old[k]; ok {
			seen++
			if ov == v {
				continue
			}
		}
		if !shellName(k) || strings.ContainsAny(v, "\n\x00") {
			return nil, false
		}
		msg = append(append(msg, kv...), '\n')
	}
	if seen != len(old) {
		return nil, false
	}
	return append(msg, "go\n"...), true
}

// shellName reports whether k is a name sh can export.
func shellName(k string) bool {
	for i, r := range k {
		if !(r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9') {
			return false
		}
	}
	return k != ""
}
