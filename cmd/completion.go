package cmd

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script for bash or zsh",
		ArgsUsage: "bash|zsh",
		Description: `EXAMPLES:
   source <(leaderrun completion bash)      # in ~/.bashrc
   source <(leaderrun completion zsh)       # in ~/.zshrc`,
		Action: func(c *cli.Context) error {
			switch c.Args().First() {
			case "bash":
				fmt.Print(bashCompletion)
			case "zsh":
				fmt.Print(zshCompletion)
			default:
				return usageErrorf("leaderrun completion: name a shell, bash or zsh")
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
