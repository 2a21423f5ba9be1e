package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/layout"
	"github.com/urfave/cli/v3"
)

// completeNames completes the names of the lock directory (its *.lock
// files) as the argument of who, status, publish, subscribe and lockfile,
// and the command's flags after a dash.
func completeNames(ctx context.Context, c *cli.Command) {
	if completeFlags(ctx, c) || c.NArg() > 0 {
		return
	}
	dir := lockDir(c)
	if dir == "" {
		dir = elect.DefaultDir()
	}
	printNames(c.Root().Writer, dir)
}

// completeCommands completes the app's subcommands, and its flags after
// a dash.
func completeCommands(ctx context.Context, c *cli.Command) {
	if completeFlags(ctx, c) {
		return
	}
	for _, sub := range c.Commands {
		if !sub.Hidden {
			for _, n := range sub.Names() {
				fmt.Fprintln(c.Root().Writer, n)
			}
		}
	}
}

// completeFlags completes the flags of c when the word being completed
// (before --generate-bash-completion in os.Args, where the shell's script
// puts it) starts with a dash: every name, long or short, that the word
// begins, except a flag already on the command line. It reports whether
// the word was one.
func completeFlags(_ context.Context, c *cli.Command) bool {
	n := len(os.Args)
	if n < 3 || !strings.HasPrefix(os.Args[n-2], "-") {
		return false
	}
	word := os.Args[n-2]
	prefix := strings.TrimPrefix(strings.TrimPrefix(word, "-"), "-")
	for _, f := range c.Flags {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		for _, name := range f.Names() {
			dashes := "--"
			if len(name) == 1 {
				dashes = "-"
			}
			short := len(name) == 1
			if short && strings.HasPrefix(word, "--") || !strings.HasPrefix(name, prefix) || name == prefix || slices.Contains(os.Args, dashes+name) {
				continue
			}
			fmt.Fprintln(c.Root().Writer, dashes+name)
		}
	}
	return true
}

// fishScript is the fish completion script of root, once it has run:
// urfave/cli's, which completes flags and subcommands, and fishNames.
// urfave/cli adds a hidden completion command of its own (with pwsh)
// behind ours as it runs; the script would offer its shells too.
func fishScript(root *cli.Command) (string, error) {
	root.Commands = slices.DeleteFunc(root.Commands, func(sub *cli.Command) bool { return sub.Hidden && sub.Name == "completion" })
	script, err := root.ToFishCompletion()
	return script + fishNames(root.Commands), err
}

// fishNames adds the names of the lock directory to urfave/cli's fish
// script, which completes flags and subcommands, after every command of
// cmds that completes names (completeNames).
func fishNames(cmds []*cli.Command) string {
	var names []string
	ours := reflect.ValueOf(completeNames).Pointer()
	for _, c := range cmds {
		if c.ShellComplete != nil && reflect.ValueOf(c.ShellComplete).Pointer() == ours {
			names = append(names, c.Name)
		}
	}
	s := "complete -c leaderrun -n '__fish_seen_subcommand_from " + strings.Join(names, " ") +
		"' -f -a '(leaderrun (commandline -opc)[2..-1] --generate-bash-completion 2>/dev/null)'\n" +
		"complete -c leaderrun -n '__fish_seen_subcommand_from completion' -f -a '" + strings.Join(shells, " ") + "'\n" +
		"complete -c leaderrun -l name -x -a '(leaderrun (commandline -opc)[2..-1] --name --generate-bash-completion 2>/dev/null)'\n"
	for _, f := range []string{"restart", "notify-ready"} {
		s += "complete -c leaderrun -l " + f + " -x -a '" + strings.Join(flagValues[f], " ") + "'\n"
	}
	return s
}

// shells are the shells completion writes a script for.
var shells = []string{"bash", "zsh", "fish"}

// flagValues are the values the completion offers after a flag that
// takes one of a few words.
var flagValues = map[string][]string{
	"restart":      {"never", "on-failure", "always"},
	"notify-ready": {readyLead, readyStart, readyCommand},
}

// completeFlagValue completes the value of the flag that args ends with
// (`leaderrun --restart --generate-shell-completion`, after completionArgs): the modes of
// --restart and --notify-ready, the names of the lock directory for
// --name. It reports false when args asks something else; for a flag
// whose value is a file or a number it prints nothing, so that the
// shell completes file names (complete -o default).
func (a *App) completeFlagValue(args []string) bool {
	n := len(args)
	if n < 3 || args[n-1] != "--generate-shell-completion" || !strings.HasPrefix(args[n-2], "-") || strings.Contains(args[n-2], "=") {
		return false
	}
	name := strings.TrimLeft(args[n-2], "-")
	takesValue := takesValueOf(a.root.Flags)
	for _, c := range a.root.Commands {
		for k, v := range takesValueOf(c.Flags) {
			takesValue[k] = takesValue[k] || v
		}
	}
	if !takesValue[name] {
		return false
	}
	switch name {
	case "name":
		printNames(a.root.Writer, completionDir(args[:n-2]))
	default:
		for _, v := range flagValues[name] {
			fmt.Fprintln(a.root.Writer, v)
		}
	}
	return true
}

// completionDir is the lock directory a command line being completed
// names (--dir DIR, --dir=DIR, else LEADERRUN_DIR), or the default.
func completionDir(args []string) string {
	dir := os.Getenv("LEADERRUN_DIR")
	for i := 1; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			i = len(args)
		case a == "--dir" && i+1 < len(args):
			dir = args[i+1]
			i++
		case strings.HasPrefix(a, "--dir="):
			dir = strings.TrimPrefix(a, "--dir=")
		}
	}
	if dir == "" {
		dir = elect.DefaultDir()
	}
	return dir
}

// printNames prints the lock names of dir (its *.lock files).
func printNames(w io.Writer, dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), layout.LockFile("")); ok && elect.ValidateName(name) == nil {
			fmt.Fprintln(w, name)
		}
	}
}

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script for bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Description: `The scripts complete subcommands, flags, the names of the lock
directory after who, status, publish, subscribe, lockfile and --name, the
modes of --restart and --notify-ready, and the shells after completion.
The Debian package installs them.

EXAMPLES:
   source <(leaderrun completion bash)      # in ~/.bashrc
   source <(leaderrun completion zsh)       # in ~/.zshrc
   leaderrun completion fish > ~/.config/fish/completions/leaderrun.fish`,
		ShellComplete: func(_ context.Context, c *cli.Command) {
			if c.NArg() == 0 {
				for _, sh := range shells {
					fmt.Fprintln(c.Root().Writer, sh)
				}
			}
		},
		Action: func(_ context.Context, c *cli.Command) error {
			switch c.Args().First() {
			case "bash":
				fmt.Print(bashCompletion)
			case "zsh":
				fmt.Print(zshCompletion)
			case "fish":
				script, err := fishScript(c.Root())
				if err != nil {
					return exitf(ExitSoftware, "leaderrun completion fish: %v", err)
				}
				fmt.Print(script)
			default:
				return usageErrorf("leaderrun completion: name a shell: bash, zsh or fish")
			}
			return nil
		},
	}
}

// completionArgs turns the --generate-bash-completion that ends a
// completion request of the scripts below (and of earlier ones, which
// users keep in their shell's files) into urfave/cli's
// --generate-shell-completion.
func completionArgs(args []string) []string {
	if n := len(args); n > 1 && args[n-1] == "--generate-bash-completion" {
		return append(slices.Clone(args[:n-1]), "--generate-shell-completion")
	}
	return args
}

// The scripts ask leaderrun itself (--generate-bash-completion, which
// completionArgs passes on to urfave/cli) for the words that may follow.
const bashCompletion = `_leaderrun_complete() {
  local cur words
  cur="${COMP_WORDS[COMP_CWORD]}"
  if [[ " ${COMP_WORDS[*]:0:COMP_CWORD} " == *" -- "* ]]; then
    COMPREPLY=($(compgen -c -- "$cur")); return
  fi
  if [[ "$cur" == -* ]]; then
    words=$("${COMP_WORDS[0]}" "${COMP_WORDS[@]:1:$COMP_CWORD-1}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    words=$("${COMP_WORDS[0]}" "${COMP_WORDS[@]:1:$COMP_CWORD-1}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _leaderrun_complete leaderrun
`

const zshCompletion = `#compdef leaderrun
_leaderrun() {
  local -a opts
  if [[ "${words[@]:0:$CURRENT-1}" == *" -- "* ]]; then _command_names; return; fi
  if [[ "$PREFIX" == -* ]]; then
    opts=("${(@f)$(${words[1]} ${words[@]:1:$CURRENT-2} $PREFIX --generate-bash-completion 2>/dev/null)}")
  else
    opts=("${(@f)$(${words[1]} ${words[@]:1:$CURRENT-2} --generate-bash-completion 2>/dev/null)}")
  fi
  compadd -a opts
}
compdef _leaderrun leaderrun
`
