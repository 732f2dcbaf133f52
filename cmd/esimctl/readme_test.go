package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The README's esimctl section stays in step with the commands: every
// `bin/esimctl ...` line of it names a command that exists with flags it
// has, and every command is shown there.
func TestReadmeShowsEveryCommandAsItIs(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(readme), "\n## Operating it: esimctl\n")
	if !found {
		t.Fatal(`README.md has no "## Operating it: esimctl" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	root := (&cli{stdout: io.Discard, stderr: io.Discard}).rootCommand(func(string) string { return "" })
	flag := regexp.MustCompile(`(?:^|\s|\[)(--[a-z-]+)`)
	shown := map[string]bool{}
	for l := range strings.Lines(section) {
		line, ok := strings.CutPrefix(strings.TrimSpace(l), "bin/esimctl ")
		if !ok {
			continue
		}
		line, _, _ = strings.Cut(line, "#")
		cmd, _, err := root.Find(strings.Fields(line))
		if err != nil || !cmd.Runnable() || cmd == root {
			t.Errorf("README: `esimctl %s` names no command", line)
			continue
		}
		shown[commandPath(cmd)] = true
		for _, m := range flag.FindAllStringSubmatch(line, -1) {
			if name := strings.TrimPrefix(m[1], "--"); cmd.Flags().Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil {
				t.Errorf("README: `esimctl %s`: %s has no --%s", line, commandPath(cmd), name)
			}
		}
	}
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		if !cmd.HasSubCommands() && cmd.HasParent() && cmd.IsAvailableCommand() && cmd.Name() != "help" && !shown[commandPath(cmd)] {
			t.Errorf("the README's esimctl section shows no `esimctl %s`", commandPath(cmd))
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
