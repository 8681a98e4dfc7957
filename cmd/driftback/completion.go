package main

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// runCompletion writes a shell's completion script: the commands, and each
// command's flags, asked of driftback itself when completing (so they are
// never out of date).
func runCompletion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("completion", "completion bash|zsh|fish", stderr)
	if err := parseFlags(fs, args); err != nil {
		return parseExit(err)
	}
	script, ok := completionScripts[fs.Arg(0)]
	if fs.NArg() != 1 || !ok {
		fmt.Fprintln(stderr, "driftback completion: name one shell: bash, zsh or fish")
		return exitError
	}
	fmt.Fprint(stdout, script)
	return exitOK
}

const bashCompletion = `# driftback completion for bash: source <(driftback completion bash)
_driftback() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  if [[ $COMP_CWORD -eq 1 ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(driftback __complete 2>/dev/null)" -- "$cur")
  elif [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(driftback __complete "${COMP_WORDS[1]}" 2>/dev/null)" -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  fi
}
complete -o default -F _driftback driftback
`

var completionScripts = map[string]string{
	"bash": bashCompletion,
	"zsh":  "# driftback completion for zsh: source <(driftback completion zsh)\nautoload -U +X bashcompinit && bashcompinit\n" + strings.SplitN(bashCompletion, "\n", 2)[1],
	"fish": `# driftback completion for fish: driftback completion fish | source
complete -c driftback -n __fish_use_subcommand -f -a '(driftback __complete 2>/dev/null)'
complete -c driftback -n 'not __fish_use_subcommand' -a '(driftback __complete (commandline -opc)[2] 2>/dev/null)'
`,
}

// usageFlag is a flag's line in a command's -h.
var usageFlag = regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)

// complete prints, for a completion script, a command's flags, as its -h
// lists them (the commands themselves, asked with no argument, are quick's
// to print).
func complete(args []string, stdout io.Writer) int {
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		var help bytes.Buffer
		c.run([]string{"-h"}, io.Discard, &help)
		for _, m := range usageFlag.FindAllStringSubmatch(help.String(), -1) {
			if len(m[1]) == 1 {
				fmt.Fprintln(stdout, "-"+m[1])
			} else {
				fmt.Fprintln(stdout, "--"+m[1])
			}
		}
	}
	return exitOK
}
