package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/services/ordering"
	orderingpg "github.com/esimplatform/esim/services/ordering/postgres"
	"github.com/esimplatform/esim/services/webhook"
	webhookpg "github.com/esimplatform/esim/services/webhook/postgres"
)

// The seeded rows pass every check of the services' schemas and read
// back through their stores as the lists do: each account's totals, row 0
// newest, a deep page where the bench asks for it. A second seeding finds
// them there and adds nothing.
func TestSeedListsWritesWholeLists(t *testing.T) {
	ctx := context.Background()
	orderingURL, webhookURL := pgtest.NewDatabase(t), pgtest.NewDatabase(t)
	orderingPool, err := orderingpg.Open(ctx, orderingURL)
	if err != nil {
		t.Fatal(err)
	}
	defer orderingPool.Close()
	webhookPool, err := webhookpg.Open(ctx, webhookURL)
	if err != nil {
		t.Fatal(err)
	}
	defer webhookPool.Close()
	accounts := []listAccount{
		{name: "small", id: uuid.NewString(), rows: 100, iccidTag: "0001"},
		{name: "big", id: uuid.NewString(), rows: 250, iccidTag: "0002"},
	}
	say := func(string, ...any) {}
	if seeded, err := seedLists(ctx, orderingURL, webhookURL, accounts, say); err != nil || !seeded {
		t.Fatalf("seedLists = %v, %v", seeded, err)
	}
	if seeded, err := seedLists(ctx, orderingURL, webhookURL, accounts, say); err != nil || seeded {
		t.Fatalf("seedLists again = %v, %v; want nothing seeded", seeded, err)
	}

	orders := orderingpg.NewStore(orderingPool, 0)
	events, err := webhookpg.NewStore(webhookPool, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range accounts {
		scope := ordering.Scope{AccountID: uuid.MustParse(a.id), Environment: ordering.Sandbox}
		deep := int64(float64(a.rows) * listDeepFraction)
		first, total, err := orders.ListOrders(ctx, ordering.OrderQuery{Scope: &scope, Limit: 5})
		if err != nil || total != int64(a.rows) || len(first) != 5 || len(first[0].Esims) != 1 || first[0].Status != ordering.StatusCompleted {
			t.Fatalf("%s: ListOrders = %d of %d, %v", a.name, len(first), total, err)
		}
		page, _, err := orders.ListOrders(ctx, ordering.OrderQuery{Scope: &scope, Limit: 5, Offset: deep})
		if err != nil || len(page) != 5 || !page[0].CreatedAt.Equal(first[0].CreatedAt.Add(-time.Duration(deep)*time.Second)) {
			t.Errorf("%s: the page at %d is not the order %d seconds older: %v", a.name, deep, deep, err)
		}
		esims, total, err := orders.ListEsims(ctx, ordering.EsimQuery{Scope: &scope, Limit: 5, Offset: deep})
		if err != nil || total != int64(a.rows) || len(esims) != 5 || !strings.HasPrefix(esims[0].ICCID, "89999999"+a.iccidTag) {
			t.Errorf("%s: ListEsims = %d of %d, %v", a.name, len(esims), total, err)
		}
		wscope := webhook.Scope{AccountID: scope.AccountID, Environment: webhook.Sandbox}
		evs, total, err := events.ListEvents(ctx, webhook.EventFilter{Scope: &wscope}, 5, deep)
		if err != nil || total != int64(a.rows) || len(evs) != 5 || evs[0].OrderID != page[0].ID {
			t.Errorf("%s: ListEvents = %d of %d, %v; want the events of the orders listed", a.name, len(evs), total, err)
		}
	}
}

func TestListsSection(t *testing.T) {
	r := listResults{rows: []listRow{
		{endpoint: "orders", smallPage: 1, bigPage: 1, small: result{Requests: 10, P50: 2 * time.Millisecond}, big: result{Requests: 10, P50: 2500 * time.Microsecond}},
		{endpoint: "orders", position: 0.9, smallPage: 10, bigPage: 9001, small: result{Requests: 10, P50: 2 * time.Millisecond}, big: result{Requests: 10, P50: 40 * time.Millisecond}},
	}}
	var b strings.Builder
	r.section(func(format string, args ...any) { b.WriteString(fmt.Sprintf(format, args...)) })
	for _, want := range []string{
		"with `limit=100` for an account of 1000 rows and one of 1000000: the first page and those at 50% and 90% of the rows, one worker for 3s each ([method](docs/benchmarks.md#lists-at-scale)).",
		"| GET /v1/orders | 1 / 1 | 2.00 ms | 0.00 ms | 2.50 ms | 0.00 ms | 1.25 |", "| 10 / 9001 |", "| 20.00 |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the section lacks %q:\n%s", want, b.String())
		}
	}
	want := []goal{
		{section: listsSection, name: "GET /v1/orders page 1 / 1, big / small p50", measured: "1.25", want: "<= 1.5", met: true},
		{section: listsSection, name: "GET /v1/orders page 10 / 9001, big / small p50", measured: "20.00", want: "<= 1.5"},
	}
	if got := r.goals(); !slices.Equal(got, want) {
		t.Errorf("goals %+v, want %+v: a ratio of 1.25 met, one of 20 not", got, want)
	}
	if c := (config{only: onlyLists}); !c.runs(onlyLists) || c.runs(onlyOrders) {
		t.Error("-only lists selects the wrong phases")
	}
}
