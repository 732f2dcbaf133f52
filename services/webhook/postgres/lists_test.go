package postgres_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/services/webhook"
)

// An unfiltered list's total is kept by a trigger, not counted: it must
// still be the scope's count of events, an event read twice (added again)
// counted once.
func TestEventTotalsFollowInserts(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	a, b := scope(), scope()
	first := newEvent(a)
	add(t, st, first)
	add(t, st, newEvent(a))
	add(t, st, newEvent(b))
	if added, err := st.AddEvent(ctx, first); err != nil || added {
		t.Fatalf("AddEvent of an event stored already = %v, %v", added, err)
	}
	for s, want := range map[webhook.Scope]int64{a: 2, b: 1, {AccountID: a.AccountID, Environment: webhook.Live}: 0} {
		if _, total, err := st.ListEvents(ctx, webhook.EventFilter{Scope: &s}, 1, 0); err != nil || total != want {
			t.Errorf("%v: total %d, %v; want %d", s, total, err, want)
		}
	}
}

// The unfiltered list, as sqlc generated it, finds a page's first event
// by an index-only scan of events_listing_idx and reads the page from
// there as a range: no skipped event is read from the table, however deep
// the page. Planned with the planner told to avoid anything else, and
// without the operators' index across scopes (dropped in the transaction,
// rolled back): on an empty table the planner takes either, and only the
// scope's serves the index-only scan.
func TestListUsesTheIndex(t *testing.T) {
	_, pool := newStore(t)
	indexOnly := regexp.MustCompile(`Index Only Scan (Backward )?using events_listing_idx `)
	keyset := regexp.MustCompile(`Index Cond: .*ROW\((\w+\.)?created_at, (\w+\.)?id\) [<>]= `)
	for _, name := range []string{"listEventsInScopeFrom", "listEventsInScopeFromOldest"} {
		text := pgtest.ExplainGenerated(t, pool, "db/queries.sql.go", name,
			"SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off; DROP INDEX events_created_idx",
			scope().AccountID, "sandbox", int64(9000), int32(100))
		if !indexOnly.MatchString(text) || !keyset.MatchString(text) || strings.Contains(text, "Sort") {
			t.Errorf("%s does not skip to its page by an index-only scan of events_listing_idx and read the page as a range:\n%s", name, text)
		}
	}
}

// Every page of the unfiltered list, read by keyset from whichever end is
// nearer, is the page OFFSET reads: the filtered list's, here with a
// filter every event passes. Events of the same instant make the id
// decide.
func TestWholeListPagesAreOffsetPages(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	a := scope()
	const n = 9
	for i := range n {
		e := newEvent(a)
		e.CreatedAt = now.Add(time.Duration(i%4) * time.Second)
		add(t, st, e)
	}
	add(t, st, newEvent(scope()))
	ids := func(events []webhook.Event) string {
		var out []string
		for _, e := range events {
			out = append(out, e.ID)
		}
		return strings.Join(out, ",")
	}
	for _, limit := range []int32{1, 3, 4, 100} {
		for offset := int64(0); offset <= n; offset++ {
			whole, wt, err := st.ListEvents(ctx, webhook.EventFilter{Scope: &a}, limit, offset)
			if err != nil {
				t.Fatal(err)
			}
			filtered, ft, err := st.ListEvents(ctx, webhook.EventFilter{Scope: &a, Type: webhook.OrderCompleted}, limit, offset)
			if err != nil {
				t.Fatal(err)
			}
			if ids(whole) != ids(filtered) || wt != ft {
				t.Errorf("limit %d offset %d: %s of %d, want %s of %d", limit, offset, ids(whole), wt, ids(filtered), ft)
			}
		}
	}
}
