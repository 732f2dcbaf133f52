package main

import (
	"strings"
	"testing"
)

// A group given without a subcommand is a usage error naming the
// subcommands, with or without --json: printing the help and exiting 0
// would let a script that forgot the subcommand "succeed" with no JSON.
func TestBareGroupIsUsageError(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "esimctl: missing command: accounts, keys or plans"},
		{[]string{"accounts"}, "esimctl: accounts: missing subcommand: create, get, list or set-rate-limit"},
		{[]string{"keys"}, "esimctl: keys: missing subcommand: create, list or revoke"},
		{[]string{"plans"}, "esimctl: plans: missing subcommand: get, list or retire"},
	} {
		for _, args := range [][]string{tc.args, append(append([]string{}, tc.args...), "--json"), append([]string{"--json"}, tc.args...)} {
			r := esimctl(t, nil, args...)
			name := "esimctl " + strings.Join(args, " ")
			if r.code != 2 {
				t.Errorf("%s: exit %d, want 2; stderr %q", name, r.code, r.stderr)
			}
			// Errors never go to stdout, --json or not: a script reads
			// stdout as the JSON answer and the exit status as success.
			if r.stdout != "" {
				t.Errorf("%s: printed on stdout:\n%s", name, r.stdout)
			}
			if first, _, _ := strings.Cut(r.stderr, "\n"); first != tc.want {
				t.Errorf("%s: error line %q, want %q", name, first, tc.want)
			}
		}
	}
	// Asking for help is not an error.
	for _, args := range [][]string{{"--help"}, {"keys", "--help"}, {"keys", "--json", "--help"}, {"help", "keys"}, {"plans", "-h"}} {
		r := esimctl(t, nil, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage:") || r.stderr != "" {
			t.Errorf("esimctl %s: exit %d, stderr %q, stdout:\n%s", strings.Join(args, " "), r.code, r.stderr, r.stdout)
		}
	}
}

// The services word their errors with what was being done ("create key for
// account A: not found"); esimctl says what it was doing too, and the two
// must not stack into "create key for account A: create key for account A:
// not found".
func TestCallErrorsSayTheirContextOnce(t *testing.T) {
	env := map[string]string{"ESIM_ACCOUNTS_URL": startAccounts(t), "ESIM_CATALOGUE_URL": startCatalogue(t)}
	const unknownID = "0193e000-0000-7000-8000-000000000000"
	upperID := strings.ToUpper(unknownID) // the services print ids in lower case

	var acct account
	esimctl(t, env, "accounts", "create", "--name", "Context", "--json").ok(t).data(t, &acct)

	for _, tc := range []struct {
		args    []string
		context string
	}{
		{[]string{"accounts", "create", "--name", strings.Repeat("n", 1000)}, "create account"},
		{[]string{"accounts", "get", unknownID}, "get account " + unknownID},
		{[]string{"accounts", "get", upperID}, "get account " + upperID},
		{[]string{"accounts", "get", "not-an-id"}, "get account not-an-id"},
		{[]string{"accounts", "set-rate-limit", "--account", unknownID, "--per-minute", "10"}, "set rate limit of account " + unknownID},
		{[]string{"keys", "create", "--account", unknownID, "--env", "sandbox"}, "create key for account " + unknownID},
		{[]string{"keys", "create", "--account", upperID, "--env", "live", "--json"}, "create key for account " + upperID},
		{[]string{"keys", "list", "--account", unknownID}, "list keys of account " + unknownID},
		{[]string{"keys", "revoke", "--account", acct.ID, "--key", unknownID}, "revoke key " + unknownID + " of account " + acct.ID},
		{[]string{"keys", "revoke", "--account", unknownID, "--key", unknownID, "--json"}, "revoke key " + unknownID + " of account " + unknownID},
		{[]string{"plans", "get", unknownID}, "get plan " + unknownID},
		{[]string{"plans", "retire", unknownID}, "retire plan " + unknownID},
		{[]string{"plans", "retire", upperID, "--json"}, "retire plan " + upperID},
	} {
		r := esimctl(t, env, tc.args...)
		r.wantError(t, 1, "esimctl: "+tc.context+": ")
		first, _, _ := strings.Cut(r.stderr, "\n")
		// Compared case-insensitively: a service echoing the id in its own
		// spelling is still the same context said twice.
		verb, _, _ := strings.Cut(tc.context, " ")
		if n := strings.Count(strings.ToLower(first), strings.ToLower(verb)+" "); n != 1 {
			t.Errorf("esimctl %s: %q says %q %d times, want once", strings.Join(tc.args, " "), first, verb, n)
		}
	}
}
