//go:build unix

package proctest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	Main(map[string]func() int{
		// echo says "ready", then echoes each line of stdin until
		// "exit CODE" or the end of stdin.
		"echo": func() int {
			fmt.Println("ready")
			sc := bufio.NewScanner(os.Stdin)
			for sc.Scan() {
				if code, ok := strings.CutPrefix(sc.Text(), "exit "); ok {
					n, _ := strconv.Atoi(code)
					return n
				}
				fmt.Println(sc.Text())
			}
			return 0
		},
		// stubborn ignores stdin's end and SIGTERM: only SIGKILL ends it.
		"stubborn": func() int {
			signal.Ignore(syscall.SIGTERM)
			fmt.Println("ready")
			<-make(chan struct{})
			return 0
		},
	})
	os.Exit(m.Run())
}

func TestExpectSendWait(t *testing.T) {
	p := StartRole(t, "echo", "echo", "X=1")
	p.Expect("ready")
	if err := p.Send("hello"); err != nil {
		t.Fatal(err)
	}
	if got := p.Expect("hel"); got != "hello" {
		t.Fatalf("Expect returned %q", got)
	}
	p.Quiet(20 * time.Millisecond)
	p.Send("exit 7")
	if code := p.Wait(); code != 7 {
		t.Fatalf("exit code %d; want 7", code)
	}
	if got := p.Lines(); len(got) != 2 || p.Count("hel") != 1 {
		t.Fatalf("lines %q", got)
	}
	if err := p.Signal(syscall.SIGTERM); err != os.ErrProcessDone {
		t.Fatalf("Signal after exit: %v; want os.ErrProcessDone", err)
	}
	select {
	case <-p.Exited():
	default:
		t.Fatal("Exited not closed after Wait")
	}
}

func TestRun(t *testing.T) {
	cmd := Command("echo")
	lines, code := Run(t, "echo", cmd, Options{})
	if code != 0 || len(lines) != 1 || lines[0] != "ready" {
		t.Fatalf("Run: %q, exit %d", lines, code)
	}
}

func TestOnLineSeesEveryLineBeforeExit(t *testing.T) {
	var seen []string // only OnLine's goroutine writes, before Exited
	p := Start(t, "echo", Command("echo"), Options{OnLine: func(l string) { seen = append(seen, l) }})
	p.Send("a")
	p.Send("b")
	p.Send("exit 0")
	<-p.Exited()
	if strings.Join(seen, ",") != "ready,a,b" {
		t.Fatalf("OnLine saw %q", seen)
	}
}

// The cleanup ends a process that ignores its stdin's end and SIGTERM, and
// one that is stopped, and reaps both: afterwards no /proc entry or a
// zombie is left of either.
func TestCleanupKillsAndReaps(t *testing.T) {
	var pids []int
	t.Run("inner", func(t *testing.T) {
		a := StartRole(t, "stubborn", "stubborn")
		a.Expect("ready")
		b := StartRole(t, "stopped", "stubborn")
		b.Expect("ready")
		b.Signal(syscall.SIGSTOP)
		pids = []int{a.PID(), b.PID()}
	})
	for _, pid := range pids {
		if st := procState(pid); st != "" && st != "Z" {
			t.Errorf("pid %d is in state %s after its test's cleanup", pid, st)
		}
	}
}

// A grandchild that keeps stdout open does not keep the process from being
// reaped, and the cleanup ends the whole group it leads.
func TestGrandchildHoldingStdout(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	var grandchild int
	t.Run("inner", func(t *testing.T) {
		p := Start(t, "sh", exec.Command(sh, "-c", "sleep 30 & echo $!; exit 3"), Options{Setpgid: true})
		line := p.Expect("")
		grandchild, _ = strconv.Atoi(line)
		start := time.Now()
		if code := p.Wait(); code != 3 {
			t.Fatalf("exit code %d", code)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("reaped after %v", d)
		}
		// The leader is reaped: its group may no longer be signalled.
		if err := p.SignalGroup(syscall.SIGKILL); err != os.ErrProcessDone {
			t.Fatalf("SignalGroup after exit: %v", err)
		}
	})
	if grandchild < 2 {
		t.Fatalf("no grandchild pid")
	}
	// The group was not signalled (its leader had exited), so the
	// sleep lives on; it is ours to end.
	if st := procState(grandchild); st != "" && st != "Z" && grandchild >= 2 {
		syscall.Kill(grandchild, syscall.SIGKILL)
	}
}

func TestSignalGroupNeedsOwnGroup(t *testing.T) {
	p := StartRole(t, "echo", "echo")
	p.Expect("ready")
	if err := p.SignalGroup(syscall.SIGTERM); err == nil || err == os.ErrProcessDone {
		t.Fatalf("SignalGroup without Setpgid: %v; want a refusal", err)
	}
}

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, "n reaches 3", func() bool { n++; return n >= 3 })
}
