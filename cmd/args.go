package cmd

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/urfave/cli/v3"
)

// The argument rewriting that makes urfave/cli parse leaderrun's lines as
// flock(1) and timeout(1) users expect: flags stop at COMMAND, a -- in
// front of COMMAND stays, and send's and publish's words pass through.

// stopAtCommand makes the app stop parsing its flags at COMMAND (`leaderrun
// -n sleep -n 5` gives -n to sleep), as flock(1) and timeout(1) do; the
// subcommands take their flags anywhere before a --.
var stopAtCommand = 1

// passThrough puts a -- in front of the first word after send's NAME or
// publish's NAME that looks like a flag the command does not have, so that
// it and what follows are ARGs (MESSAGE words), as before urfave/cli v3,
// which refuses such a word: `leaderrun send app --new-window` hands
// --new-window to the primary. The command's own flags (--forward-stdin)
// are still its own anywhere before that word or a --.
func passThrough(args []string, root *cli.Command, appValue map[string]bool) []string {
	at := subcommandAt(args, appValue)
	if at >= len(args) || args[at] != "send" && args[at] != "publish" {
		return args
	}
	takesValue := takesValueOf(root.Command(args[at]).Flags)
	takesValue["help"], takesValue["h"] = false, false
	named := false
	for i := at + 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return args
		}
		if !isFlagWord(a) {
			named = true
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		value, known := takesValue[name]
		if !known && named {
			out := append(slices.Clone(args[:i]), "--")
			return append(out, args[i:]...)
		}
		if value && !hasValue {
			i++
		}
	}
	return args
}

// subcommandAt is the index in args of the first word after the app's
// own flags (`leaderrun --dir D who NAME --json`): the subcommand, if
// any, or COMMAND, or a --. appValue is the app's flag-arity map.
func subcommandAt(args []string, appValue map[string]bool) int {
	at := 1
	for at < len(args) && strings.HasPrefix(args[at], "-") && args[at] != "-" && args[at] != "--" {
		if wantsValue(args[at], appValue) {
			at++
		}
		at++
	}
	return at
}

// runsCommand reports whether args is a line of the default action that
// asks for no help, version or completion: the app's flags, then COMMAND
// or a -- (or nothing, for the usage error).
func runsCommand(args []string, root *cli.Command, appValue map[string]bool) bool {
	if n := len(args); n > 1 && args[n-1] == "--generate-shell-completion" {
		return false
	}
	at := subcommandAt(args, appValue)
	for _, w := range args[1:min(at, len(args))] {
		if !strings.HasPrefix(w, "-") {
			continue // a flag's value
		}
		name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
		if name == "help" || name == "h" || name == "version" || !strings.HasPrefix(w, "--") && strings.Contains(name, "h") {
			return false // -h, or a group with it (-nh)
		}
	}
	return at >= len(args) || args[at] == "--" || args[at] != "help" && args[at] != "h" && root.Command(args[at]) == nil
}

// isFlagWord reports whether urfave/cli takes a for a flag: a dash, or
// two, then a letter.
func isFlagWord(a string) bool {
	r, _ := utf8.DecodeRuneInString(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"))
	return strings.HasPrefix(a, "-") && unicode.IsLetter(r)
}

// wantsValue reports whether urfave/cli takes the word after the flag
// word a for its value, as it parses: a word with = has its value; a name
// the command has (--name, or -name in Go's style) is that flag; a single
// dash and several letters that are no name is a short group (-nE 3),
// whose last flag takes the value.
func wantsValue(a string, takesValue map[string]bool) bool {
	name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
	if hasValue {
		return false
	}
	if _, known := takesValue[name]; !known && !strings.HasPrefix(a, "--") && len(name) > 1 {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[len(name)-size:]
	}
	return takesValue[name]
}

// protectDashDash doubles the `--` that ends leaderrun's own flags, so that
// urfave/cli, which drops it while parsing, leaves one in front of COMMAND
// and does not take a COMMAND named like a subcommand (who, status) for
// that subcommand. runAction removes it again. takesValue is the app's
// flag-arity map.
func protectDashDash(args []string, takesValue map[string]bool) []string {
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			out := append([]string{}, args[:i+1]...)
			return append(append(out, "--"), args[i+1:]...)
		case !strings.HasPrefix(a, "-") || a == "-":
			return args // COMMAND without --, or a subcommand
		case wantsValue(a, takesValue):
			i++
		}
	}
	return args
}

// The flag-arity map: protectDashDash, the handover and the completion
// ask it whether a flag takes a value. The app's is built once (App.arity).
//
// takesValueOf maps each flag name to whether it takes a value.
func takesValueOf(flags []cli.Flag) map[string]bool {
	m := map[string]bool{}
	for _, f := range flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			m[n] = !isBool
		}
	}
	return m
}
