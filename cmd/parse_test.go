package cmd

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"
)

// parsed runs args through the app's command tree with every action
// replaced by one that records which command ran, its arguments and the
// flags set on it or on the app.
type parsed struct {
	cmd  string
	args []string
	set  []string // NAME=VALUE, the command's flags, then the app's
}

func parse(t testing.TB, args []string) (parsed, error) {
	t.Helper()
	a := New()
	a.root.Writer, a.root.ErrWriter = io.Discard, io.Discard
	var got parsed
	record := func(_ context.Context, c *cli.Command) error {
		got = parsed{cmd: c.Name, args: c.Args().Slice()}
		for _, cc := range c.Lineage() {
			for _, f := range cc.Flags {
				if f.IsSet() {
					got.set = append(got.set, f.Names()[0]+"="+fmt.Sprint(f.Get()))
				}
			}
		}
		return nil
	}
	a.root.Action = record
	for _, c := range a.root.Commands {
		if c.Name != "help" { // it prints, to Writer
			c.Action = record
		}
	}
	err := a.run(context.Background(), args)
	return got, err
}

// TestFlagsAfterArgs: a subcommand's flags may follow its arguments
// (`leaderrun who NAME --json`), the app's flags end at COMMAND, and
// nothing after a -- is a flag.
func TestFlagsAfterArgs(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want parsed
	}{
		{[]string{"lr", "who", "a", "--json"}, parsed{"who", []string{"a"}, []string{"json=true"}}},
		{[]string{"lr", "status", "a", "--dir", "/x", "--json"}, parsed{"status", []string{"a"}, []string{"dir=/x", "json=true"}}},
		{[]string{"lr", "publish", "a", "-5", "degrees", "--", "--json"}, parsed{"publish", []string{"a", "-5", "degrees", "--", "--json"}, nil}},
		{[]string{"lr", "publish", "a", "--", "--json"}, parsed{"publish", []string{"a", "--json"}, nil}},
		{[]string{"lr", "--name", "x", "--", "who", "--json"}, parsed{"leaderrun", []string{"--", "who", "--json"}, []string{"name=x"}}},
		{[]string{"lr", "--dir", "/x", "who", "a", "--json"}, parsed{"who", []string{"a"}, []string{"json=true", "dir=/x"}}},
		{[]string{"lr", "--dir=/x", "-v", "status", "a", "--json"}, parsed{"status", []string{"a"}, []string{"json=true", "dir=/x", "verbose=true"}}},
		{[]string{"lr", "--name", "who", "--", "status", "--json"}, parsed{"leaderrun", []string{"--", "status", "--json"}, []string{"name=who"}}},
		{[]string{"lr", "-n", "who", "a", "--json"}, parsed{"who", []string{"a"}, []string{"json=true", "nonblock=true"}}},
		{[]string{"lr", "-n", "sleep", "-n", "5"}, parsed{"leaderrun", []string{"sleep", "-n", "5"}, []string{"nonblock=true"}}},
		{[]string{"lr", "-nE", "3", "--", "who"}, parsed{"leaderrun", []string{"--", "who"}, []string{"nonblock=true", "conflict-exit-code=3"}}},
		{[]string{"lr", "send", "app", "--forward-stdin", "--", "--x"}, parsed{"send", []string{"app", "--x"}, []string{"forward-stdin=true"}}},
		// send's ARGs and publish's MESSAGE keep words that look like
		// flags the command does not have (passThrough).
		{[]string{"lr", "send", "app", "--new-window", "x", "--forward-stdin"}, parsed{"send", []string{"app", "--new-window", "x", "--forward-stdin"}, nil}},
		{[]string{"lr", "send", "app", "--forward-stdin", "-x"}, parsed{"send", []string{"app", "-x"}, []string{"forward-stdin=true"}}},
		{[]string{"lr", "send", "app", "--", "--", "x"}, parsed{"send", []string{"app", "--", "x"}, nil}},
		{[]string{"lr", "-v", "publish", "a", "-hello", "--dir", "/x"}, parsed{"publish", []string{"a", "-hello", "--dir", "/x"}, []string{"verbose=true"}}},
		{[]string{"lr", "publish", "a", "--dir", "/x", "hi"}, parsed{"publish", []string{"a", "hi"}, []string{"dir=/x"}}},
	} {
		got, err := parse(t, tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: ran %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// TestAppFlagsNotOnSubcommands: the app's flags (-n, --name) are not a
// subcommand's, as before urfave/cli v3, whose flags are inherited unless
// local.
func TestAppFlagsNotOnSubcommands(t *testing.T) {
	for _, in := range [][]string{{"lr", "who", "-n", "a"}, {"lr", "status", "--name", "x"}, {"lr", "who", "a", "--group-shared"}} {
		if got, err := parse(t, in); ExitCode(err) != ExitUsage {
			t.Errorf("%q: ran %+v, %v; want a usage error", in, got, err)
		}
	}
}

func TestProtectDashDash(t *testing.T) {
	app := New()
	for _, tc := range []struct{ in, want []string }{
		{[]string{"lr", "--name", "x", "--", "who"}, []string{"lr", "--name", "x", "--", "--", "who"}},
		{[]string{"lr", "-nE", "3", "--", "who"}, []string{"lr", "-nE", "3", "--", "--", "who"}},
		{[]string{"lr", "who", "--", "x"}, []string{"lr", "who", "--", "x"}},
		{[]string{"lr", "-n", "sleep", "1"}, []string{"lr", "-n", "sleep", "1"}},
	} {
		if got := protectDashDash(tc.in, app.arity); !slices.Equal(got, tc.want) {
			t.Errorf("protectDashDash(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]string{"1.5": "1.5s", "1500ms": "1.5s", "0": "0s", "0.3": "300ms", "2m": "2m0s"} {
		d, err := parseDuration(in)
		if err != nil || d.String() != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %s", in, d, err, want)
		}
	}
	for _, in := range []string{"", "-1", "soon", "1e300"} {
		if _, err := parseDuration(in); err == nil {
			t.Errorf("parseDuration(%q) succeeded", in)
		}
	}
}

func TestDeriveName(t *testing.T) {
	if got := deriveName([]string{"/usr/bin/backup.sh", "/home"}); len(got) != len("backup.sh-")+8 || got[:10] != "backup.sh-" {
		t.Errorf("deriveName = %q", got)
	}
	if a, b := deriveName([]string{"x", "a b"}), deriveName([]string{"x a", "b"}); a == b {
		t.Errorf("argument boundaries are lost: %q", a)
	}
	if got := deriveName([]string{"..."}); got[:4] != "cmd-" {
		t.Errorf("deriveName(...) = %q", got)
	}
}

// TestRunsCommand: the subcommands are left out only for a line that runs
// COMMAND, never for one that asks for help, the version, completion or a
// subcommand.
func TestRunsCommand(t *testing.T) {
	root := New().root
	for _, tc := range []struct {
		in   []string
		want bool
	}{
		{[]string{"lr", "-n", "sleep", "--help"}, true},
		{[]string{"lr", "--dir", "who", "x"}, true},
		{[]string{"lr", "--", "who"}, true},
		{[]string{"lr"}, true},
		{[]string{"lr", "who", "x"}, false},
		{[]string{"lr", "-n", "status"}, false},
		{[]string{"lr", "help"}, false},
		{[]string{"lr", "h", "who"}, false},
		{[]string{"lr", "--help"}, false},
		{[]string{"lr", "-nh", "--", "x"}, false},
		{[]string{"lr", "--version"}, false},
		{[]string{"lr", "--na", "--generate-shell-completion"}, false},
	} {
		if got := runsCommand(tc.in, root, takesValueOf(root.Flags)); got != tc.want {
			t.Errorf("runsCommand(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestFishScript: the fish script offers the shells of leaderrun's
// completion command only, not those of urfave/cli's own (pwsh).
func TestFishScript(t *testing.T) {
	a := New()
	a.root.Writer = io.Discard
	if err := a.run(context.Background(), []string{"leaderrun", "completion", "--help"}); err != nil {
		t.Fatal(err)
	}
	script, err := fishScript(a.root)
	if err != nil || strings.Contains(script, "pwsh") || !strings.Contains(script, "-a 'bash zsh fish'") {
		t.Fatalf("fish script (%v):\n%s", err, script)
	}
}

// TestHelpUsageErrors: a bad line for help is a usage error (64), as for
// every other command, not urfave/cli's plain error (70).
func TestHelpUsageErrors(t *testing.T) {
	for _, in := range [][]string{{"lr", "help", "--nosuch"}, {"lr", "h", "-n"}, {"lr", "help", "nosuch"}, {"lr", "--help", "sleep"}} {
		if got, err := parse(t, in); ExitCode(err) != ExitUsage {
			t.Errorf("%q: ran %+v, %v (exit %d); want a usage error", in, got, err, ExitCode(err))
		}
	}
}
