package cmd

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

// notifySocket is a datagram socket speaking the service manager's side
// of sd_notify(3): each datagram is one message (newline-separated
// assignments); name is a path, or @ and an abstract name.
type notifySocket struct {
	t    *testing.T
	name string
	msgs chan string
}

func listenNotify(t *testing.T, name string) *notifySocket {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	s := &notifySocket{t: t, name: name, msgs: make(chan string, 64)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			if err != nil {
				close(s.msgs)
				return
			}
			for _, m := range strings.Split(strings.TrimRight(string(buf[:n]), "\n"), "\n") {
				s.msgs <- m
			}
		}
	}()
	t.Cleanup(func() { c.Close() })
	return s
}

// expect reads messages until one matches re, and returns it with the
// ones read before it.
func (s *notifySocket) expect(re string) (match []string, before []string) {
	s.t.Helper()
	rx := regexp.MustCompile(re)
	timeout := time.After(proctest.Wait)
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				s.t.Fatalf("%s closed before %q; got %q", s.name, re, before)
			}
			if sm := rx.FindStringSubmatch(m); sm != nil {
				return sm, before
			}
			before = append(before, m)
		case <-timeout:
			s.t.Fatalf("%s: no message %q within %s; got %q", s.name, re, proctest.Wait, before)
		}
	}
}

// startNotified starts the leaderrun command line args with NOTIFY_SOCKET
// set to sock, in the lock directory dir.
func startNotified(t *testing.T, name, dir, sock string, args ...string) *proctest.Proc {
	t.Helper()
	c := exec.Command(os.Args[0], append([]string{"--dir", dir}, args...)...)
	c.Env = append(os.Environ(), "LEADERRUN_TEST_ROLE=cli", "NOTIFY_SOCKET="+sock)
	return proctest.Start(t, name, c, proctest.Options{})
}

// With NOTIFY_SOCKET set, a standby says where it waits and for whom, and
// is READY only once it leads; the leader says its epoch, and STOPPING=1
// when it is told to stop. COMMAND does not get NOTIFY_SOCKET. Both a
// socket path and an abstract name (@) work.
func TestNotifyReadyWhenLeading(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "locks")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sa := listenNotify(t, filepath.Join(t.TempDir(), "notify-a"))
	sb := listenNotify(t, fmt.Sprintf("@leaderrun-test-notify-%d", os.Getpid()))
	cmdline := []string{"--name", "sd", "--", "sh", "-c", `echo "sock=${NOTIFY_SOCKET-unset}"; exec sleep 30`}

	a := startNotified(t, "a", dir, sa.name, cmdline...)
	m, before := sa.expect(`^STATUS=leading sd, epoch (\d+)$`)
	if len(before) > 0 && !strings.HasPrefix(before[0], "STATUS=waiting") {
		t.Errorf("a sent %q before it led", before)
	}
	epochA, _ := strconv.ParseUint(m[1], 10, 64)
	sa.expect(`^READY=1$`)
	a.Expect("sock=unset")

	b := startNotified(t, "b", dir, sb.name, cmdline...)
	host, _ := os.Hostname()
	_, before = sb.expect(fmt.Sprintf(`^STATUS=waiting #1 for sd, led by pid %d on %s$`, a.PID(), regexp.QuoteMeta(host)))
	for _, msg := range before {
		if msg == "READY=1" {
			t.Fatalf("b, a standby, sent READY=1 while a led")
		}
	}

	if err := a.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sa.expect(`^STOPPING=1$`)
	m, before = sb.expect(`^STATUS=leading sd, epoch (\d+)$`)
	for _, msg := range before {
		if msg == "READY=1" {
			t.Fatalf("b sent READY=1 before it led: %q", before)
		}
	}
	if eb, _ := strconv.ParseUint(m[1], 10, 64); eb <= epochA {
		t.Errorf("b leads with epoch %d, not above a's %d", eb, epochA)
	}
	sb.expect(`^READY=1$`)
	b.Expect("sock=unset")
}

// --notify-ready=start is READY at once, also while in line; command
// hands NOTIFY_SOCKET to COMMAND and sends no READY=1 itself; a mode
// that is none is a usage error.
func TestNotifyReadyModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "locks")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sh := listenNotify(t, filepath.Join(t.TempDir(), "notify-holder"))
	holder := startNotified(t, "holder", dir, sh.name, "--name", "m", "--", "sleep", "30")
	sh.expect(`^READY=1$`)

	ss := listenNotify(t, filepath.Join(t.TempDir(), "notify-start"))
	startNotified(t, "start", dir, ss.name, "--notify-ready=start", "--name", "m", "--", "true")
	_, before := ss.expect(`^READY=1$`)
	if len(before) > 0 {
		t.Errorf("start mode sent %q before READY=1", before)
	}
	ss.expect(`^STATUS=waiting #1 for m, led by pid \d+ on `)

	sc := listenNotify(t, filepath.Join(t.TempDir(), "notify-command"))
	c := startNotified(t, "command", dir, sc.name, "--notify-ready=command", "--name", "c", "--", "sh", "-c", `echo "sock=$NOTIFY_SOCKET"; exec sleep 30`)
	c.Expect("sock=" + sc.name)
	_, before = sc.expect(`^STATUS=leading c, epoch \d+$`)
	if len(before) > 0 {
		t.Errorf("command mode sent %q", before)
	}
	if err := c.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_, before = sc.expect(`^STOPPING=1$`)
	for _, msg := range before {
		if msg == "READY=1" {
			t.Errorf("command mode sent READY=1 itself")
		}
	}
	holder.Cmd.Process.Signal(syscall.SIGTERM)
	sh.expect(`^STOPPING=1$`)

	// --single-instance: the primary's COMMAND is the service, and keeps
	// NOTIFY_SOCKET; leaderrun sends nothing.
	si := listenNotify(t, filepath.Join(t.TempDir(), "notify-single"))
	p := startNotified(t, "single", dir, si.name, "--single-instance", "--name", "si", "--", "sh", "-c", `echo "sock=$NOTIFY_SOCKET"; exec sleep 30`)
	p.Expect("sock=" + si.name)
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	// A marker of our own, after whatever leaderrun sent.
	if err := sdNotify(si.name, "END=1"); err != nil {
		t.Fatal(err)
	}
	if _, before := si.expect(`^END=1$`); len(before) > 0 {
		t.Errorf("--single-instance sent %q", before)
	}

	code, msg := runCLI(t, "--notify-ready=soon", "--name", "x", "--", "true")
	if code != ExitUsage || !strings.Contains(msg, `--notify-ready "soon" is not a mode; use lead, start or command`) {
		t.Errorf("--notify-ready=soon: exit %d, %s", code, msg)
	}
}
