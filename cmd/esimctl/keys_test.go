package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/esimplatform/esim/services/accounts"
	"github.com/esimplatform/esim/services/catalogue"
)

// paginationOf decodes the "pagination" of a --json list.
func paginationOf(t *testing.T, envelope map[string]json.RawMessage) pagination {
	t.Helper()
	raw, ok := envelope["pagination"]
	if !ok {
		t.Fatalf("no pagination in the --json output: %s", envelope)
	}
	var p pagination
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("decode pagination: %v\n%s", err, raw)
	}
	return p
}

// keys list pages like accounts list: --page and --limit, the pagination
// in --json, a footer in text when there is more than one page. Walking the
// pages lists every key once, in the order of the single default page.
func TestKeysListPaging(t *testing.T) {
	env := map[string]string{"ESIM_ACCOUNTS_URL": startAccounts(t)}
	var acct account
	esimctl(t, env, "accounts", "create", "--name", "Rotating", "--json").ok(t).data(t, &acct)
	for i := range 5 {
		var k key
		esimctl(t, env, "keys", "create", "--account", acct.ID, "--env", "sandbox", "--name", fmt.Sprintf("key %d", i), "--json").ok(t).data(t, &k)
		if i == 1 {
			esimctl(t, env, "keys", "revoke", "--account", acct.ID, "--key", k.ID).ok(t)
		}
	}

	// The default page holds them all.
	var all []key
	first := paginationOf(t, esimctl(t, env, "keys", "list", "--account", acct.ID, "--json").ok(t).data(t, &all))
	if len(all) != 5 || first != (pagination{Page: 1, Limit: accounts.DefaultKeyPageLimit, Total: 5}) {
		t.Fatalf("keys list: %d keys, pagination %+v; want all 5 on page 1 of size %d", len(all), first, accounts.DefaultKeyPageLimit)
	}
	var order []string
	for _, k := range all {
		order = append(order, k.ID)
	}
	if text := esimctl(t, env, "keys", "list", "--account", acct.ID).ok(t).stdout; strings.Contains(text, "page ") {
		t.Errorf("keys list on one page should have no footer:\n%s", text)
	}

	var walked []string
	for page := 1; page <= 3; page++ {
		var keys []key
		args := []string{"keys", "list", "--account", acct.ID, "--limit", "2", "--page", strconv.Itoa(page), "--json"}
		got := paginationOf(t, esimctl(t, env, args...).ok(t).data(t, &keys))
		want := pagination{Page: int32(page), Limit: 2, Total: 5, HasMore: page < 3}
		if got != want {
			t.Errorf("keys list page %d: pagination %+v, want %+v", page, got, want)
		}
		for _, k := range keys {
			walked = append(walked, k.ID)
		}
	}
	if strings.Join(walked, " ") != strings.Join(order, " ") {
		t.Errorf("pages of 2 walk %v\nwant every key once, in order: %v", walked, order)
	}

	text := esimctl(t, env, "keys", "list", "--account", acct.ID, "--limit", "2", "--page", "2").ok(t).stdout
	if !strings.HasPrefix(text, "ID ") || !strings.Contains(text, order[2]) || !strings.Contains(text, order[3]) ||
		strings.Contains(text, order[0]) || !strings.HasSuffix(text, "page 2 of 3 (5 keys; --page 3 for the next)\n") {
		t.Errorf("keys list --limit 2 --page 2:\n%s", text)
	}
	// The last page says so, and does not send the reader on.
	if text := esimctl(t, env, "keys", "list", "--account", acct.ID, "--limit", "2", "--page", "3").ok(t).stdout; !strings.Contains(text, order[4]) ||
		!strings.HasSuffix(text, "page 3 of 3 (5 keys; the last)\n") {
		t.Errorf("keys list --limit 2 --page 3:\n%s", text)
	}
	// One page holds them all: no footer.
	if text := esimctl(t, env, "keys", "list", "--account", acct.ID).ok(t).stdout; strings.Contains(text, "page") {
		t.Errorf("keys list on one page:\n%s", text)
	}

	// A last page that ends exactly at the total has nothing after it, and
	// the page before it does.
	for _, tc := range []struct {
		limit, page string
		want        pagination
	}{
		{"5", "1", pagination{Page: 1, Limit: 5, Total: 5}},
		{"4", "1", pagination{Page: 1, Limit: 4, Total: 5, HasMore: true}},
	} {
		var keys []key
		got := paginationOf(t, esimctl(t, env, "keys", "list", "--account", acct.ID, "--limit", tc.limit, "--page", tc.page, "--json").ok(t).data(t, &keys))
		if got != tc.want {
			t.Errorf("keys list --limit %s --page %s: pagination %+v, want %+v", tc.limit, tc.page, got, tc.want)
		}
	}

	// Past the end: nothing, with the real total.
	var none []key
	beyond := paginationOf(t, esimctl(t, env, "keys", "list", "--account", acct.ID, "--limit", "2", "--page", "4", "--json").ok(t).data(t, &none))
	if len(none) != 0 || beyond != (pagination{Page: 4, Limit: 2, Total: 5}) {
		t.Errorf("keys list past the end: %+v, pagination %+v", none, beyond)
	}
	if text := esimctl(t, env, "keys", "list", "--account", acct.ID, "--page", "10000").ok(t).stdout; text != "no keys on page 10000 (5 in total)\n" {
		t.Errorf("keys list far past the end:\n%s", text)
	}
}

// A --page or --limit out of the services' range is a usage error (exit 2)
// naming the flag and the bounds, found before any call, on every list.
func TestPagingOutOfRangeIsUsageError(t *testing.T) {
	accountsURL := startAccounts(t)
	var acct account
	esimctl(t, map[string]string{"ESIM_ACCOUNTS_URL": accountsURL}, "accounts", "create", "--name", "Pages", "--json").ok(t).data(t, &acct)
	countedAccounts, accountsCalls := counted(t, accountsURL)
	// No catalogue runs: a call to it would fail with exit 1, not 2.
	env := map[string]string{"ESIM_ACCOUNTS_URL": countedAccounts, "ESIM_CATALOGUE_URL": "http://127.0.0.1:1"}

	over := strconv.Itoa(accounts.MaxPage + 1)
	for _, list := range [][]string{
		{"keys", "list", "--account", acct.ID},
		{"accounts", "list"},
		{"plans", "list"},
	} {
		for _, tc := range []struct {
			flags []string
			want  string
		}{
			{[]string{"--page", "0"}, "esimctl: invalid --page 0: want 1 to 10000"},
			{[]string{"--page", "-1", "--json"}, "esimctl: invalid --page -1: want 1 to 10000"},
			{[]string{"--page", over}, "esimctl: invalid --page " + over + ": want 1 to 10000"},
			{[]string{"--page", "2147483647", "--limit", "5"}, "esimctl: invalid --page 2147483647: want 1 to 10000"},
			{[]string{"--limit", "0"}, "esimctl: invalid --limit 0: want 1 to 100"},
			{[]string{"--limit", "101", "--json"}, "esimctl: invalid --limit 101: want 1 to 100"},
			{[]string{"--limit", "-3"}, "esimctl: invalid --limit -3: want 1 to 100"},
			{[]string{"--limit", "lots"}, `esimctl: invalid argument "lots" for "--limit" flag`},
			{[]string{"--page", "2147483648"}, `esimctl: invalid argument "2147483648" for "--page" flag`},
		} {
			args := append(append([]string{}, list...), tc.flags...)
			r := esimctl(t, env, args...)
			r.wantError(t, 2)
			if first, _, _ := strings.Cut(r.stderr, "\n"); !strings.HasPrefix(first, tc.want) {
				t.Errorf("esimctl %s: error line %q, want %q", strings.Join(args, " "), first, tc.want)
			}
		}
	}
	if n := accountsCalls.Load(); n != 0 {
		t.Errorf("out-of-range paging reached the accounts service: %d calls, want none", n)
	}

	// The bounds themselves are taken.
	var keys []key
	p := paginationOf(t, esimctl(t, env, "keys", "list", "--account", acct.ID, "--page", "10000", "--limit", "100", "--json").ok(t).data(t, &keys))
	if len(keys) != 0 || p != (pagination{Page: accounts.MaxPage, Limit: accounts.MaxPageLimit}) {
		t.Errorf("keys list at the bounds: %+v, pagination %+v", keys, p)
	}
	if r := esimctl(t, nil, "keys", "list", "--help").ok(t); !strings.Contains(r.stdout, "--page") || !strings.Contains(r.stdout, "--limit") || !strings.Contains(r.stdout, "1 to 100") {
		t.Errorf("keys list --help does not document --page and --limit:\n%s", r.stdout)
	}

	// One set of bounds serves every list: the catalogue's are the same.
	if catalogue.MaxPage != maxPage || catalogue.MaxPageLimit != maxPageLimit {
		t.Errorf("catalogue pages 1..%d of 1..%d, esimctl checks 1..%d of 1..%d", catalogue.MaxPage, catalogue.MaxPageLimit, maxPage, maxPageLimit)
	}
}
