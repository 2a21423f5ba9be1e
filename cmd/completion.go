package cmd

import (
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/leaderrun/leaderrun/elect"
	cli "github.com/leaderrun/leaderrun/internal/urfavecli"
)

// completeNames completes the names of the lock directory (its *.lock
// files) as the argument of who, status, publish, subscribe and lockfile,
// and the command's flags after a dash.
func completeNames(c *cli.Context) {
	if n := len(os.Args); n >= 3 && strings.HasPrefix(os.Args[n-2], "-") {
		cli.DefaultCompleteWithFlags(c.Command)(c)
		return
	}
	if c.NArg() > 0 {
		return
	}
	dir := lockDir(c)
	if dir == "" {
		dir = elect.DefaultDir()
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), elect.LockFile("")); ok && elect.ValidateName(name) == nil {
			fmt.Fprintln(c.App.Writer, name)
		}
	}
}

// fishNames adds the names of the lock directory to urfave/cli's fish
// script, which completes flags and subcommands, after every command of
// cmds that completes names (completeNames).
func fishNames(cmds []*cli.Command) string {
	var names []string
	ours := reflect.ValueOf(completeNames).Pointer()
	for _, c := range cmds {
		if c.BashComplete != nil && reflect.ValueOf(c.BashComplete).Pointer() == ours {
			names = append(names, c.Name)
		}
	}
	return "complete -c leaderrun -n '__fish_seen_subcommand_from " + strings.Join(names, " ") +
		"' -f -a '(leaderrun (commandline -opc)[2..-1] --generate-bash-completion 2>/dev/null)'\n"
}

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script for bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Description: `The scripts complete subcommands, flags, and the names of the lock
directory after who, status, publish, subscribe and lockfile. The Debian
package installs them.

EXAMPLES:
   source <(leaderrun completion bash)      # in ~/.bashrc
   source <(leaderrun completion zsh)       # in ~/.zshrc
   leaderrun completion fish > ~/.config/fish/completions/leaderrun.fish`,
		Action: func(c *cli.Context) error {
			switch c.Args().First() {
			case "bash":
				fmt.Print(bashCompletion)
			case "zsh":
				fmt.Print(zshCompletion)
			case "fish":
				script, err := c.App.ToFishCompletion()
				if err != nil {
					return exitf(ExitSoftware, "leaderrun completion fish: %v", err)
				}
				fmt.Print(script + fishNames(c.App.Commands))
			default:
				return usageErrorf("leaderrun completion: name a shell: bash, zsh or fish")
			}
			return nil
		},
	}
}

// The scripts ask leaderrun itself (urfave/cli's --generate-bash-completion)
// for the words that may follow.
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
