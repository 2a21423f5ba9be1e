package cmd

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
)

// Fuzz targets for what the command line takes from outside: durations
// (-w, --grace), the name derived from COMMAND, and the argument
// rewriting before urfave/cli parses. Seed corpora are in
// testdata/fuzz/<target>; .ci/fuzz.sh runs each briefly.

// FuzzParseDuration: an accepted duration is not negative, is what the
// number of seconds or Go duration says, and its String() parses back to
// itself; a refused one says why in words the user can act on.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"1.5", "1500ms", "0", " 2m ", "1h30m", "-1", "-0", "1e300", "4611686018", "4611686019", "NaN", "Inf", "-Inf", "0x1p-2", "1_0", "soon", "", "9223372036854775807ns", "2562047h47m16.854775808s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDuration(s)
		if err != nil {
			msg := err.Error()
			if !strings.Contains(msg, "not a duration") && !strings.Contains(msg, "too long") && !strings.Contains(msg, "negative") {
				t.Fatalf("parseDuration(%q): unexplained error %q", s, msg)
			}
			if strings.Contains(msg, "negative") {
				if v, perr := strconv.ParseFloat(strings.TrimSpace(s), 64); perr == nil && !(v < 0) {
					t.Fatalf("parseDuration(%q) = %q, but %v is not negative", s, msg, v)
				}
			}
			return
		}
		if d < 0 {
			t.Fatalf("parseDuration(%q) = %v, negative", s, d)
		}
		if v, perr := strconv.ParseFloat(strings.TrimSpace(s), 64); perr == nil {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("parseDuration(%q) = %v: accepted a number that is not finite", s, d)
			}
			if want := v * float64(time.Second); math.Abs(float64(d)-want) > 1+want*1e-9 {
				t.Fatalf("parseDuration(%q) = %v, want about %v ns", s, d, want)
			}
		}
		if d2, err := parseDuration(d.String()); err != nil || d2 != d {
			t.Fatalf("parseDuration(%q) = %v, whose String %q parses as %v, %v", s, d, d.String(), d2, err)
		}
	})
}

// FuzzDeriveName: the name derived from any command line is a valid lock
// name of the documented shape, and the same line always gives the same
// name. Arguments are the fuzzed string split at NUL, which no argument
// can contain.
func FuzzDeriveName(f *testing.F) {
	for _, s := range []string{"/usr/bin/backup.sh\x00/home", "...", "-", "./x", "a b", "\xff\xfe", "/", "", strings.Repeat("é", 40), "x\x00\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		argv := strings.Split(s, "\x00")
		name := deriveName(argv)
		if err := elect.ValidateName(name); err != nil {
			t.Fatalf("deriveName(%q) = %q: %v", argv, name, err)
		}
		base, hash, ok := strings.Cut(name[max(0, len(name)-9):], "-")
		if !ok || base != "" || len(hash) != 8 || strings.Trim(hash, "0123456789abcdef") != "" {
			t.Fatalf("deriveName(%q) = %q, not BASE-HASH with an 8-digit hex HASH", argv, name)
		}
		if len(name)-9 > 40 {
			t.Fatalf("deriveName(%q) = %q: BASE longer than 40 bytes", argv, name)
		}
		if again := deriveName(slices.Clone(argv)); again != name {
			t.Fatalf("deriveName(%q) = %q, then %q", argv, name, again)
		}
	})
}

// FuzzArgs: the rewriting of os.Args before urfave/cli parses them only
// ever doubles a --, the one that ends leaderrun's flags (protectDashDash),
// inserts one -- where there was none (passThrough) and renames a final
// --generate-bash-completion (completionArgs); and the
// parse of any command line ends in an action or an error, never a
// panic, with COMMAND after that -- handed to the default action as it
// was given.
func FuzzArgs(f *testing.F) {
	for _, s := range []string{"--name\x00x\x00--\x00who", "-nE\x003\x00--\x00who", "who\x00a\x00--json", "status\x00a\x00--dir\x00/x\x00--json", "publish\x00a\x00-5\x00--\x00--json", "-w\x00--\x00--", "--dir=--\x00--", "who\x00--dir", "", "who\x00--j\x00--generate-bash-completion", "help\x00x", "-n\x00sleep\x00-n", "send\x00app\x00--x\x00--forward-stdin", "-v\x00publish\x00a\x00-b"} {
		f.Add(s)
	}
	flags := New().root.Flags
	f.Fuzz(func(t *testing.T, s string) {
		args := append([]string{"leaderrun"}, strings.Split(s, "\x00")...)
		p := protectDashDash(slices.Clone(args), takesValueOf(flags))
		j := 0 // where the inserted --, if any, is
		if !slices.Equal(p, args) {
			// The inserted -- follows a -- (not always the first: -w --
			// gives -w the value --).
			for j < len(args) && p[j] == args[j] {
				j++
			}
			if len(p) != len(args)+1 || j == 0 || args[j-1] != "--" || p[j] != "--" || !slices.Equal(p[j+1:], args[j:]) {
				t.Fatalf("protectDashDash(%q) = %q: not one -- doubled", args, p)
			}
		}
		if pt := passThrough(slices.Clone(p), New().root, takesValueOf(New().root.Flags)); !slices.Equal(pt, p) {
			i := 0
			for i < len(p) && pt[i] == p[i] {
				i++
			}
			if len(pt) != len(p)+1 || pt[i] != "--" || !slices.Equal(pt[i+1:], p[i:]) || slices.Contains(p[:i], "--") {
				t.Fatalf("passThrough(%q) = %q: not one -- inserted before any other", p, pt)
			}
		}
		if c := completionArgs(slices.Clone(args)); len(c) != len(args) || !slices.Equal(c[:len(c)-1], args[:len(args)-1]) ||
			c[len(c)-1] != args[len(args)-1] && !(args[len(args)-1] == "--generate-bash-completion" && len(args) > 1) {
			t.Fatalf("completionArgs(%q) = %q", args, c)
		}
		if slices.Contains(args, "--generate-bash-completion") || slices.Contains(args, "--generate-shell-completion") || slices.Contains(args, "completion") {
			return // completes, reading os.Args and the default directory
		}
		got, _ := parse(t, args)
		// A dash and a digit (-0) is an argument to urfave/cli, and so
		// COMMAND, which runOptionsFrom refuses.
		digit := j > 0 && slices.ContainsFunc(args[1:j], func(a string) bool { return strings.HasPrefix(a, "-") && a != "--" && !isFlagWord(a) })
		if j > 0 && !digit && got.cmd == "leaderrun" && !slices.Contains(args[:j], "--help") && !slices.Contains(args[:j], "-h") && !slices.Contains(args[:j], "--version") {
			// What follows the doubled --, as given: the end of args
			// (which -- of a run of them was doubled cannot be told).
			n := len(got.args) - 1
			s := len(args) - n // where COMMAND starts in args
			if n < 0 || got.args[0] != "--" || s < 2 || s > j || args[s-1] != "--" || !slices.Equal(args[s:j], slices.Repeat([]string{"--"}, j-s)) || !slices.Equal(got.args[1:], args[s:]) {
				t.Fatalf("%q: the default action got %q, want -- then %q", args, got.args, args[j:])
			}
		}
	})
}
