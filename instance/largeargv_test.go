package instance_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/leaderrun/leaderrun/instance"
)

// TestLargeArgv: arguments far over the bus's 1 MiB message limit reach
// the primary byte for byte: a launch whose own argv is about 1.9 MB (as
// `find -exec app {} +` makes; Linux's limit here is 2 MiB with the
// environment), and, through Options.Args, 5 MB holding NUL bytes and
// invalid UTF-8. Before the fix both were refused ("bus: message too
// large ... limit is 1048576") and ran nowhere.
func TestLargeArgv(t *testing.T) {
	dir := lockDir(t)
	p := startApp(t, dir, "app")
	p.expect(t, "primary ")

	arg := func(i, n int) []byte {
		b := bytes.Repeat([]byte{byte('a' + i%26)}, n)
		copy(b, fmt.Sprintf("%d\xff\n\t ", i))
		return b
	}
	var osArgs []string
	for i := range 1900 {
		osArgs = append(osArgs, string(arg(i, 1000)))
	}
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$"}, osArgs...)...)
	cmd.Env = append(os.Environ(), roleEnv+"=app", "INST_DIR="+dir, "INST_NAME=app", "INST_OSARGS=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("a launch with %d bytes of argv: %v", 1900*1000, err)
	}
	var e echo
	if err := json.Unmarshal(out, &e); err != nil {
		t.Fatalf("primary's answer (%d bytes): %v", len(out), err)
	}
	want := append([]string{"-test.run=^$"}, osArgs...)
	if len(e.Args) != len(want) {
		t.Fatalf("the primary got %d arguments, the launch had %d", len(e.Args), len(want))
	}
	for i := range want {
		if string(e.Args[i]) != want[i] {
			t.Fatalf("argument %d differs: got %q", i, e.Args[i])
		}
	}

	args := [][]byte{[]byte("echo")}
	for i := range 50 {
		a := arg(i, 100<<10)
		a[len(a)/2] = 0
		args = append(args, a, []byte{})
	}
	res, got, err := forward(t, testCtx(t), dir, "app", instance.Options{Args: args})
	if err != nil || res.Exit != 0 || res.PID != p.pid() {
		t.Fatalf("5 MB of Options.Args: %+v, %v", res, err)
	}
	e = echo{}
	if err := json.Unmarshal([]byte(got), &e); err != nil {
		t.Fatalf("primary's answer (%d bytes): %v", len(got), err)
	}
	if len(e.Args) != len(args) {
		t.Fatalf("the primary got %d arguments, sent %d", len(e.Args), len(args))
	}
	for i := range args {
		if !bytes.Equal(e.Args[i], args[i]) {
			t.Fatalf("argument %d differs", i)
		}
	}
}
