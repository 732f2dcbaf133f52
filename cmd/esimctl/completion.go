package main

import (
	"github.com/spf13/cobra"
)

// completionShells are the shells completion writes a script for.
var completionShells = []string{"bash", "zsh", "fish"}

// localAnnotation marks a command that calls no service (version,
// completion): it needs no operator credential and no service address.
const localAnnotation = "esimctl.local"

func (c *cli) completionCommand() *cobra.Command {
	var noDescriptions bool
	cmd := &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script for esimctl",
		Long: `Print a script that completes esimctl's commands, subcommands and flags in
bash, zsh or fish. The script asks esimctl itself what to complete (through
its hidden __complete command), so it completes the commands of the esimctl
it finds on PATH, including ones added after the script was installed. It
calls no service.

bash (needs the bash-completion package):
  esimctl completion bash > ~/.local/share/bash-completion/completions/esimctl
zsh (with compinit; any directory on $fpath):
  esimctl completion zsh > "${fpath[1]}/_esimctl"
fish:
  esimctl completion fish > ~/.config/fish/completions/esimctl.fish

Or, for the current shell only: source <(esimctl completion bash).`,
		Example: `  esimctl completion bash > ~/.local/share/bash-completion/completions/esimctl
  source <(esimctl completion zsh)`,
		ValidArgs:   completionShells,
		Annotations: map[string]string{localAnnotation: "true"},
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return usagef("completion: missing shell: %s", orList(completionShells))
			case len(args) > 1:
				return usagef("completion takes 1 argument: the shell (got %d)", len(args))
			}
			for _, s := range completionShells {
				if args[0] == s {
					return nil
				}
			}
			return usagef("invalid shell %q: want %s%s", args[0], orList(completionShells), didYouMean(args[0], completionShells))
		},
	}
	cmd.Flags().BoolVar(&noDescriptions, "no-descriptions", false, "complete names only, without each command's and flag's description (zsh and fish)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		root, out := cmd.Root(), c.stdout
		switch args[0] {
		case "bash":
			return root.GenBashCompletionV2(out, !noDescriptions)
		case "zsh":
			if noDescriptions {
				return root.GenZshCompletionNoDesc(out)
			}
			return root.GenZshCompletion(out)
		default:
			return root.GenFishCompletion(out, !noDescriptions)
		}
	}
	return cmd
}
