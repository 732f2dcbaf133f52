package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// topLevel is every command esimctl --help lists, from the command tree
// itself: a command added later is expected in completions unedited.
func topLevel() (names []string, tree *cobra.Command) {
	root := (&cli{stdout: io.Discard, stderr: io.Discard}).rootCommand(func(string) string { return "" })
	return subcommandNames(root), root
}

// Each shell's script is printed, is the shell's kind of script, and asks
// esimctl itself (its __complete command) what to complete, which names
// every top-level command and every group's subcommands. bash checks the
// script's syntax; zsh and fish do where they are installed, and
// otherwise the script's structure is what is checked.
func TestCompletionScripts(t *testing.T) {
	names, root := topLevel()
	if len(names) < 12 || !slices.Contains(names, "version") || !slices.Contains(names, "completion") {
		t.Fatalf("top-level commands: %v", names)
	}
	// No credential and no service is needed to print a script.
	env := map[string]string{"ESIM_OPERATOR_TOKEN": "", "ESIM_OPERATOR_TOKEN_FILE": filepath.Join(t.TempDir(), "none"), "ESIM_ACCOUNTS_URL": "notaurl"}
	for _, tc := range []struct {
		shell   string
		markers []string
		check   []string // a syntax check, run when the shell is installed
	}{
		{"bash", []string{"__start_esimctl()", "complete -o default -F __start_esimctl esimctl", "__complete"}, []string{"bash", "-n"}},
		{"zsh", []string{"#compdef esimctl", "compdef _esimctl esimctl", "_esimctl()", "__complete"}, []string{"zsh", "-n"}},
		{"fish", []string{"complete -c esimctl", "function __esimctl_perform_completion", "__complete"}, []string{"fish", "--no-execute"}},
	} {
		r := esimctl(t, env, "completion", tc.shell).ok(t)
		if r.stderr != "" {
			t.Errorf("completion %s wrote on stderr: %q", tc.shell, r.stderr)
		}
		for _, m := range tc.markers {
			if !strings.Contains(r.stdout, m) {
				t.Errorf("the %s script lacks %q", tc.shell, m)
			}
		}
		script := filepath.Join(t.TempDir(), "esimctl."+tc.shell)
		if err := os.WriteFile(script, []byte(r.stdout), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := exec.LookPath(tc.check[0]); err != nil {
			if tc.shell == "bash" {
				t.Fatalf("bash is not installed: %v", err)
			}
			continue
		}
		if out, err := exec.Command(tc.check[0], append(tc.check[1:], script)...).CombinedOutput(); err != nil {
			t.Errorf("%s finds the %s script malformed: %v\n%s", tc.check[0], tc.shell, err, out)
		}
	}
	// --no-descriptions leaves them out.
	if full, bare := esimctl(t, env, "completion", "zsh").ok(t).stdout, esimctl(t, env, "completion", "zsh", "--no-descriptions").ok(t).stdout; full == bare {
		t.Error("completion zsh --no-descriptions prints the same script")
	}

	// What the scripts are told: every top-level command, and each
	// group's subcommands.
	offered := func(words ...string) []string {
		t.Helper()
		out := esimctl(t, env, append([]string{"__complete"}, words...)...).ok(t).stdout
		var got []string
		for l := range strings.Lines(out) {
			if name, _, _ := strings.Cut(strings.TrimSpace(l), "\t"); name != "" && !strings.HasPrefix(name, ":") {
				got = append(got, name)
			}
		}
		return got
	}
	got := offered("")
	for _, name := range names {
		if !slices.Contains(got, name) {
			t.Errorf("completing `esimctl ` offers %v, not %s", got, name)
		}
	}
	for _, group := range root.Commands() {
		subs := subcommandNames(group)
		if len(subs) == 0 {
			continue
		}
		got := offered(group.Name(), "")
		for _, sub := range subs {
			if !slices.Contains(got, sub) {
				t.Errorf("completing `esimctl %s ` offers %v, not %s", group.Name(), got, sub)
			}
		}
	}
	if got := offered("completion", ""); !slices.Equal(got, completionShells) {
		t.Errorf("completing `esimctl completion ` offers %v, want %v", got, completionShells)
	}
	if got := offered("orders", "list", "--acc"); !slices.Equal(got, []string{"--account"}) {
		t.Errorf("completing `esimctl orders list --acc` offers %v", got)
	}
	if got := offered("wallet", "balance", "--env", ""); !slices.Equal(got, []string{"sandbox", "live"}) {
		t.Errorf("completing `esimctl wallet balance --env ` offers %v", got)
	}
	if got := offered("accounts", "create", "--currency", ""); !slices.Equal(got, []string{"USD", "EUR", "GBP"}) {
		t.Errorf("completing `esimctl accounts create --currency ` offers %v", got)
	}
}

// The bash script, sourced into bash, completes the esimctl on PATH: a
// built binary, as an operator has it.
func TestBashCompletionCompletesTheBinary(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "esimctl"), ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The bash-completion package's _get_comp_words_by_ref, which the
	// script calls, in its simplest form: it is not installed here, and
	// what is tested is esimctl's script, not that package.
	const harness = `
_get_comp_words_by_ref() {
  while [[ $# -gt 0 ]]; do
    case $1 in
      -n) shift 2 ;;
      cur) cur=${COMP_WORDS[COMP_CWORD]}; shift ;;
      prev) prev=${COMP_WORDS[COMP_CWORD-1]}; shift ;;
      words) words=("${COMP_WORDS[@]}"); shift ;;
      cword) cword=$COMP_CWORD; shift ;;
      *) shift ;;
    esac
  done
}
source <(esimctl completion bash) || exit 3
COMP_WORDS=(esimctl "$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}; COMP_TYPE=9
__start_esimctl esimctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
`
	complete := func(words ...string) []string {
		t.Helper()
		cmd := exec.Command("bash", append([]string{"-c", harness, "harness"}, words...)...)
		cmd.Env = []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + dir}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("bash completing %q: %v", words, err)
		}
		return strings.Fields(string(out))
	}
	names, _ := topLevel()
	got := complete("")
	for _, name := range names {
		if !slices.Contains(got, name) {
			t.Errorf("bash completes `esimctl ` to %v, without %s", got, name)
		}
	}
	if got := complete("acc"); !slices.Equal(got, []string{"accounts"}) {
		t.Errorf("bash completes `esimctl acc` to %v", got)
	}
	if got := complete("webhooks", "rot"); !slices.Equal(got, []string{"rotate-secret"}) {
		t.Errorf("bash completes `esimctl webhooks rot` to %v", got)
	}
	if got := complete("keys", "revoke", "--ke"); !slices.Equal(got, []string{"--key"}) {
		t.Errorf("bash completes `esimctl keys revoke --ke` to %v", got)
	}
}
