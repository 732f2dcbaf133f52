package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/services/ordering"
)

// The search finds a scope's orders by the start of their reference or,
// in any case, of their email (reference matches first), and its eSIMs by
// the start of their ICCID; another scope's never, and LIKE's wildcards
// in a query only as themselves.
func TestSearchByPrefix(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	mk := func(scope ordering.Scope, key, ref, email string, d time.Duration) ordering.Order {
		o := newOrder(scope, key, at(d))
		o.Customer.Reference, o.Customer.Email = ref, email
		return complete(t, s, insert(t, s, o))
	}
	mk(acme, "a", "BK-100", "Mia.Rossi@Example.com", 0)
	booking := mk(acme, "b", "BK-101", "noah@example.com", time.Second)
	mk(acme, "c", "50%_off", "", 2*time.Second)
	mk(other, "a", "BK-100", "mia.rossi@example.com", 0)

	ids := func(orders []ordering.Order) string {
		var out []string
		for _, o := range orders {
			out = append(out, o.Customer.Reference)
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct {
		prefix string
		limit  int32
		want   string
	}{
		{"BK-10", 10, "BK-100,BK-101"},
		{"BK-10", 1, "BK-100"},
		{"bk-10", 10, ""}, // references are matched as written
		{"mia.", 10, "BK-100"},
		{"MIA.ROSSI@example", 10, "BK-100"},
		{"noah@", 10, "BK-101"},
		{"50%", 10, "50%_off"},
		{"50_", 10, ""},
		{"5%", 10, ""},
		{"%", 10, ""},
		{"_", 10, ""},
	} {
		got, err := s.SearchOrders(ctx, ordering.SearchQuery{Scope: acme, Prefix: c.prefix, Limit: c.limit})
		if err != nil {
			t.Fatalf("SearchOrders %q: %v", c.prefix, err)
		}
		if ids(got) != c.want {
			t.Errorf("SearchOrders %q (limit %d) = %q, want %q", c.prefix, c.limit, ids(got), c.want)
		}
		for _, o := range got {
			if o.Scope != acme || len(o.Esims) != 2 {
				t.Errorf("SearchOrders %q found order %s of %v with %d eSIMs", c.prefix, o.ID, o.Scope, len(o.Esims))
			}
		}
	}

	iccid := booking.Esims[1].ICCID
	for _, c := range []struct {
		prefix string
		want   int
	}{{iccid, 1}, {iccid[:len(iccid)-1], 1}, {"89", 6}, {"1", 0}} {
		got, err := s.SearchEsims(ctx, ordering.SearchQuery{Scope: acme, Prefix: c.prefix, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != c.want {
			t.Errorf("SearchEsims %q found %d, want %d", c.prefix, len(got), c.want)
		}
		for i, e := range got {
			if !strings.HasPrefix(e.ICCID, c.prefix) || i > 0 && e.ICCID < got[i-1].ICCID {
				t.Errorf("SearchEsims %q: %s, not by ICCID", c.prefix, e.ICCID)
			}
		}
	}
	if got, _ := s.SearchEsims(ctx, ordering.SearchQuery{Scope: other, Prefix: iccid, Limit: 10}); len(got) != 0 {
		t.Errorf("another scope's search finds %d of acme's eSIMs", len(got))
	}
	if _, err := s.SearchEsims(ctx, ordering.SearchQuery{Scope: acme, Prefix: "", Limit: 10}); err == nil {
		t.Error("an empty prefix was searched")
	}
}

// Each search query, as sqlc generated it, reads its prefix from an
// index as a range rather than filtering a scope's every order or eSIM:
// planned with the planner told to avoid anything else, the plan names
// the search index with the prefix's bounds as its condition.
func TestSearchUsesTheIndexes(t *testing.T) {
	_, pool := newStore(t)
	for _, c := range []struct {
		name, index string
		args        []any
	}{
		{"searchOrdersByReference", "orders_search_reference_idx", []any{acme.AccountID, "sandbox", "BK-1%", 21}},
		{"searchOrdersByEmail", "orders_search_email_idx", []any{acme.AccountID, "sandbox", "Mia%", 21}},
		{"searchEsimsByICCID", "esims_search_iccid_idx", []any{acme.AccountID, "sandbox", "8999%", 21}},
	} {
		text := pgtest.ExplainGenerated(t, pool, "db/queries.sql.go", c.name,
			"SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off", c.args...)
		if !strings.Contains(text, "Index Scan using "+c.index) || !strings.Contains(text, "~>=~") && !strings.Contains(text, ">=") {
			t.Errorf("%s reads no range of %s:\n%s", c.name, c.index, text)
		}
	}
}
