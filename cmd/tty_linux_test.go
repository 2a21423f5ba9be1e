package cmd

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary as the leaderrun command line, as main.go runs it, with
// os.Args[1:] as its arguments.
func init() {
	if os.Getenv("LEADERRUN_TEST_ROLE") != "cli" {
		return
	}
	os.Unsetenv("LEADERRUN_TEST_ROLE")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := New().Run(ctx, append([]string{"leaderrun"}, os.Args[1:]...))
	stop()
	os.Exit(ExitCode(err))
}

// pty is a pseudo-terminal whose slave side is the controlling terminal
// of a session the test starts.
type pty struct {
	t      *testing.T
	master *os.File
	mu     sync.Mutex
	out    bytes.Buffer
}

// newPty opens a pseudo-terminal (posix_openpt(3) by hand: /dev/ptmx,
// TIOCSPTLCK, TIOCGPTN) and returns it with its slave side.
func newPty(t *testing.T) (*pty, *os.File) {
	t.Helper()
	// Opened with os.OpenFile, the master is in Go's poller, so that
	// Close ends a pending Read at once and really closes it (hang-up).
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	var n uint32
	rc, err := m.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) {
			if err = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); err == nil {
				n, err = unix.IoctlGetUint32(int(fd), unix.TIOCGPTN)
			}
		})
		if err == nil {
			err = cerr
		}
	}
	if err != nil {
		m.Close()
		t.Fatalf("pty: %v", err)
	}
	// The slave stays blocking: COMMAND reads it.
	sfd, err := unix.Open("/dev/pts/"+strconv.Itoa(int(n)), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		m.Close()
		t.Fatalf("pty slave: %v", err)
	}
	p := &pty{t: t, master: m}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { m.Close() })
	return p, os.NewFile(uintptr(sfd), "pty")
}

func (p *pty) write(s string) {
	p.t.Helper()
	if _, err := p.master.WriteString(s); err != nil {
		p.t.Fatalf("write to the terminal: %v", err)
	}
}

// waitFor waits until the terminal has shown a match of re, and returns
// the submatches.
func (p *pty) waitFor(re string) []string {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(15 * time.Second)
	for {
		p.mu.Lock()
		out := p.out.String()
		p.mu.Unlock()
		if m := rx.FindStringSubmatch(out); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting for %q on the terminal; it shows:\n%s", re, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// session is a process the test started as a session leader; done is
// closed once it has been waited for (then cmd.ProcessState is set).
type session struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startSession starts argv as the leader of a new session whose
// controlling terminal is the pty, with $LR running the leaderrun command
// line, and ends it with the test.
func startSession(t *testing.T, slave *os.File, argv ...string) *session {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "locks")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = append(os.Environ(), "LR="+os.Args[0], "LEADERRUN_TEST_ROLE=cli", "LEADERRUN_DIR="+dir)
	c.Stdin, c.Stdout, c.Stderr = slave, slave, slave
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	done := make(chan struct{})
	go func() {
		c.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		// The session's leader; leaderrun's COMMAND dies with leaderrun
		// (Pdeathsig).
		c.Process.Kill()
		<-done
	})
	return &session{c, done}
}

// procStat returns fields of /proc/PID/stat after the command name:
// [0] is the state, [2] the process group, [5] the terminal's
// foreground group.
func procStat(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	return strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
}

// waitState waits until process pid is in one of the states (R, S, T, Z).
func waitState(t *testing.T, pid int, states string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		st := procStat(t, pid)
		if st == nil && strings.Contains(states, "Z") || st != nil && strings.Contains(states, st[0]) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for process %d to be in state %s: %v", pid, states, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The shell around leaderrun reports leaderrun's status, then whether its
// process group has the terminal again.
const reportBack = `; echo "rc=$?"; set -- $(sed 's/.*) //' /proc/$$/stat); echo "pgrp=$3 tpgid=$6"`

func checkRestored(t *testing.T, p *pty) {
	t.Helper()
	m := p.waitFor(`pgrp=(\d+) tpgid=(-?\d+)`)
	if m[1] != m[2] {
		t.Errorf("after COMMAND, the terminal's foreground group is %s, want the shell's %s", m[2], m[1])
	}
}

// A COMMAND that reads the terminal gets the terminal: without it, it
// would be stopped by SIGTTIN and never print.
func TestTerminalForeground(t *testing.T) {
	p, slave := newPty(t)
	startSession(t, slave, "sh", "-c", `"$LR" --name t -- sh -c 'echo ready; read x; echo "got $x"'`+reportBack)
	p.waitFor(`ready`)
	p.write("hello\n")
	p.waitFor(`got hello`)
	p.waitFor(`rc=0\r?\n`)
	checkRestored(t, p)
}

// Ctrl-C goes to COMMAND's group, the terminal's foreground, and ends the
// term.
func TestTerminalInterrupt(t *testing.T) {
	p, slave := newPty(t)
	startSession(t, slave, "sh", "-c", `"$LR" --name t -- sh -c 'echo ready; exec cat'`+reportBack)
	p.waitFor(`ready`)
	p.write("\x03")
	p.waitFor(`rc=130\r?\n`)
	checkRestored(t, p)
}

// Ctrl-Z stops COMMAND; leaderrun gives the terminal back to the shell
// and stops too, so the shell sees its job stopped. Continued, it gives
// COMMAND the terminal again and continues it.
func TestTerminalSuspend(t *testing.T) {
	p, slave := newPty(t)
	sh := startSession(t, slave, "sh", "-c", `"$LR" --name t -- sh -c 'echo ready $LEADERRUN_PID; read x; echo "got $x"'`+reportBack)
	lr, _ := strconv.Atoi(p.waitFor(`ready (\d+)`)[1])
	p.write("\x1a")
	waitState(t, lr, "T")
	if st := procStat(t, sh.cmd.Process.Pid); st == nil || st[5] != st[2] {
		t.Errorf("while stopped, the terminal's foreground group is %v, want the shell's", st)
	}
	if err := syscall.Kill(lr, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	p.write("hello\n")
	p.waitFor(`got hello`)
	p.waitFor(`rc=0\r?\n`)
	checkRestored(t, p)
}

// The terminal closed: the term ends, also for a COMMAND that ignores
// SIGHUP and SIGTERM (SIGKILL after --grace).
func TestTerminalHangup(t *testing.T) {
	p, slave := newPty(t)
	lr := startSession(t, slave, os.Args[0], "--name", "t", "--grace", "0.3", "--",
		"sh", "-c", `trap "" HUP TERM; echo ready $$; while :; do sleep 0.05; done`)
	cmdPid, _ := strconv.Atoi(p.waitFor(`ready (\d+)`)[1])
	p.master.Close()
	select {
	case <-lr.done:
		if code := lr.cmd.ProcessState.ExitCode(); code != ExitSignalBase+int(syscall.SIGKILL) {
			t.Errorf("leaderrun ended with %v, want exit %d (COMMAND killed)", lr.cmd.ProcessState, ExitSignalBase+int(syscall.SIGKILL))
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("leaderrun still runs 15s after its terminal hung up")
	}
	waitState(t, cmdPid, "Z")
}

// COMMAND gets the terminal when leaderrun's stdin is a pipe (echo x |
// leaderrun -- prompt): the terminal is leaderrun's controlling terminal,
// not its stdin. Without it, COMMAND's read of /dev/tty would stop it
// (SIGTTIN) and it would never print.
func TestTerminalPipedStdin(t *testing.T) {
	p, slave := newPty(t)
	startSession(t, slave, "sh", "-c", `echo x | "$LR" --name t -- sh -c 'read piped; echo "ready $piped"; read p </dev/tty; echo "got $p"'`+reportBack)
	p.waitFor(`ready x`)
	p.write("secret\n")
	p.waitFor(`got secret`)
	p.waitFor(`rc=0\r?\n`)
	checkRestored(t, p)
}

// Ctrl-C reaches a COMMAND whose leaderrun reads a pipe, at once (not
// after --grace, with 137).
func TestTerminalPipedStdinInterrupt(t *testing.T) {
	p, slave := newPty(t)
	startSession(t, slave, "sh", "-c", `seq 200 | "$LR" --name t --grace 30 -- sh -c 'echo ready; exec cat /dev/tty >/dev/null'`+reportBack)
	p.waitFor(`ready`)
	// cat is reading the terminal once it is in state S, not T.
	p.write("\x03")
	p.waitFor(`rc=130\r?\n`)
	checkRestored(t, p)
}

// With stdout redirected, and nobody else in leaderrun's process group
// (the shell that waits for it does not count), COMMAND gets the
// terminal too.
func TestTerminalStdoutRedirected(t *testing.T) {
	p, slave := newPty(t)
	dir := t.TempDir()
	startSession(t, slave, "sh", "-c", `"$LR" --name t -- sh -c 'echo ready >/dev/tty; read p </dev/tty; echo "got $p"' >`+dir+`/out`+reportBack)
	p.waitFor(`ready`)
	p.write("hello\n")
	p.waitFor(`rc=0\r?\n`)
	checkRestored(t, p)
	if b, _ := os.ReadFile(dir + "/out"); string(b) != "got hello\n" {
		t.Errorf("COMMAND's stdout has %q, want %q", b, "got hello\n")
	}
}

// In a pipeline that leaderrun writes into (leaderrun -- cmd | reader),
// the other commands of the pipeline keep the terminal: here the reader
// reads it while COMMAND runs.
func TestTerminalPipelinePeerKeepsIt(t *testing.T) {
	p, slave := newPty(t)
	dir := t.TempDir()
	// COMMAND runs until the reader has read.
	command := `i=0; while [ ! -e ` + dir + `/read ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done; echo out`
	startSession(t, slave, "sh", "-c", `"$LR" --name t -- sh -c '`+command+`' | sh -c 'echo peer-ready >/dev/tty; read x </dev/tty; touch `+dir+`/read; echo "peer got $x"; cat'`+reportBack)
	p.waitFor(`peer-ready`)
	p.write("typed\n")
	p.waitFor(`peer got typed`)
	p.waitFor(`out\r?\n`)
	p.waitFor(`rc=0\r?\n`)
	checkRestored(t, p)
}
