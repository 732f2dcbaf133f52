package postgres_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/services/ordering"
)

// The unfiltered lists' totals are kept by triggers, not counted: they
// must still be each scope's count of its orders and eSIMs, an order
// inserted twice (its key replayed) counted once, a refused one deleted
// not at all.
func TestListTotalsFollowInserts(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t)
	for i := range 5 {
		o := insert(t, s, newOrder(acme, fmt.Sprintf("k%d", i), at(time.Duration(i)*time.Second)))
		if i%2 == 0 {
			complete(t, s, o)
		}
	}
	replay := newOrder(acme, "k0", at(time.Minute))
	locked(t, s, func(ctx context.Context, l ordering.Locked) error {
		_ = l.InsertOrder(ctx, replay) // a conflict: the key is taken
		return nil
	})
	complete(t, s, insert(t, s, newOrder(other, "k0", at(time.Hour))))
	// A pending order refused before it was charged is deleted: it takes
	// itself off the total again.
	refused := insert(t, s, newOrder(acme, "refused", at(2*time.Minute)))
	locked(t, s, func(ctx context.Context, l ordering.Locked) error {
		return l.DeletePending(ctx, refused.ID)
	})

	for _, scope := range []ordering.Scope{acme, other} {
		var wantOrders, wantEsims int64
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM orders WHERE account_id = $1 AND kind = 'esims'", scope.AccountID).Scan(&wantOrders); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM esims WHERE account_id = $1", scope.AccountID).Scan(&wantEsims); err != nil {
			t.Fatal(err)
		}
		_, orders, err := s.ListOrders(ctx, ordering.OrderQuery{Scope: &scope, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		_, esims, err := s.ListEsims(ctx, ordering.EsimQuery{Scope: &scope, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if orders != wantOrders || esims != wantEsims {
			t.Errorf("%v: totals %d orders, %d eSIMs; counted %d, %d", scope, orders, esims, wantOrders, wantEsims)
		}
	}
	if _, n, _ := s.ListOrders(ctx, ordering.OrderQuery{Scope: &acme, Limit: 1}); n != 5 {
		t.Errorf("acme's total is %d orders, want 5", n)
	}
}

// Every page of the unfiltered lists, read by keyset from whichever end is
// nearer, is the page OFFSET reads: the filtered lists', here with filters
// every row passes. Orders created in the same instant make the id decide.
func TestWholeListPagesAreOffsetPages(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	const n = 9
	for i := range n {
		o := insert(t, s, newOrder(acme, fmt.Sprintf("k%d", i), at(time.Duration(i%4)*time.Second)))
		complete(t, s, o)
	}
	insert(t, s, newOrder(other, "k0", at(time.Hour)))
	for _, limit := range []int32{1, 3, 4, 100} {
		for offset := int64(0); offset <= n; offset++ {
			whole, wt, err := s.ListOrders(ctx, ordering.OrderQuery{Scope: &acme, Limit: limit, Offset: offset})
			if err != nil {
				t.Fatal(err)
			}
			filtered, ft, err := s.ListOrders(ctx, ordering.OrderQuery{Scope: &acme, Status: ordering.StatusCompleted, Limit: limit, Offset: offset})
			if err != nil {
				t.Fatal(err)
			}
			if orderIDs(whole) != orderIDs(filtered) || wt != ft {
				t.Errorf("orders, limit %d offset %d: %s of %d, want %s of %d", limit, offset, orderIDs(whole), wt, orderIDs(filtered), ft)
			}
			wholeEsims, wt, err := s.ListEsims(ctx, ordering.EsimQuery{Scope: &acme, Limit: limit, Offset: offset})
			if err != nil {
				t.Fatal(err)
			}
			filteredEsims, ft, err := s.ListEsims(ctx, ordering.EsimQuery{Scope: &acme, Status: string(ordering.EsimAllocated), Limit: limit, Offset: offset})
			if err != nil {
				t.Fatal(err)
			}
			if esimIDs(wholeEsims) != esimIDs(filteredEsims) || wt != ft {
				t.Errorf("eSIMs, limit %d offset %d: %s of %d, want %s of %d", limit, offset, esimIDs(wholeEsims), wt, esimIDs(filteredEsims), ft)
			}
		}
	}
}

func orderIDs(orders []ordering.Order) string {
	var out []string
	for _, o := range orders {
		out = append(out, o.ID.String()[:8]+fmt.Sprint(len(o.Esims)))
	}
	return strings.Join(out, ",")
}

func esimIDs(esims []ordering.Esim) string {
	var out []string
	for _, e := range esims {
		out = append(out, e.ID.String())
	}
	return strings.Join(out, ",")
}

// The unfiltered lists, as sqlc generated them, find a page's first row
// by an index-only scan of the scope's index and read the page from there
// as a range: no skipped row is read from the table, however deep the
// page. Planned with the planner told to avoid anything else, as
// TestSearchUsesTheIndexes does, and without the operators' index across
// scopes (dropped in the transaction, rolled back): on an empty table the
// planner takes either, and only the scope's serves the index-only scan.
func TestListsUseTheIndexes(t *testing.T) {
	_, pool := newStore(t)
	keyset := regexp.MustCompile(`Index Cond: .*ROW\((\w+\.)?created_at, (\w+\.)?id\) [<>]= `)
	for _, c := range []struct {
		name, index, across string
	}{
		{"listOrdersInScopeFrom", "orders_list_idx", "orders_created_at_idx"},
		{"listOrdersInScopeFromOldest", "orders_list_idx", "orders_created_at_idx"},
		{"listEsimsInScopeFrom", "esims_scope_created_at_idx", "esims_created_at_idx"},
		{"listEsimsInScopeFromOldest", "esims_scope_created_at_idx", "esims_created_at_idx"},
	} {
		text := pgtest.ExplainGenerated(t, pool, "db/queries.sql.go", c.name,
			"SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off; DROP INDEX "+c.across,
			acme.AccountID, "sandbox", int64(9000), int32(100))
		indexOnly := regexp.MustCompile(`Index Only Scan (Backward )?using ` + c.index + ` `)
		if !indexOnly.MatchString(text) || !keyset.MatchString(text) || strings.Contains(text, "Sort") {
			t.Errorf("%s does not skip to its page by an index-only scan of %s and read the page as a range:\n%s", c.name, c.index, text)
		}
	}
}
