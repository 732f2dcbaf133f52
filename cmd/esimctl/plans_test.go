package main

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	catalogueserver "github.com/esimplatform/esim/services/catalogue/server"
)

// startCatalogue runs the real catalogue service, seeded, on its own fresh
// database.
func startCatalogue(t *testing.T) string {
	t.Helper()
	srv, err := catalogueserver.New(context.Background(),
		catalogueserver.Config{DatabaseURL: config.NewSecretURL(pgtest.NewDatabase(t)), SeedCatalogue: true, Callers: internalauthtest.Callers()}, newTelemetry(t, "catalogue"))
	if err != nil {
		t.Fatalf("catalogue server: %v", err)
	}
	t.Cleanup(srv.Close)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

type plan struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	Coverage struct {
		Scope     string   `json:"scope"`
		Countries []string `json:"countries"`
		Region    *string  `json:"region"`
	} `json:"coverage"`
	Data struct {
		Unlimited  bool   `json:"unlimited"`
		TotalBytes *int64 `json:"total_bytes"`
	} `json:"data"`
	ValidityDays *int32 `json:"validity_days"`
	Prices       []struct {
		Amount      float64 `json:"amount"`
		AmountMinor int64   `json:"amount_minor"`
		Currency    string  `json:"currency"`
	} `json:"prices"`
	Status string `json:"status"`
}

func TestPlans(t *testing.T) {
	env := map[string]string{"ESIM_CATALOGUE_URL": startCatalogue(t)}

	var japan []plan
	envelope := esimctl(t, env, "plans", "list", "--country", "jp", "--limit", "100", "--json").ok(t).data(t, &japan)
	if len(japan) == 0 {
		t.Fatal("no plans cover JP in the seeded catalogue")
	}
	if !strings.Contains(string(envelope["pagination"]), `"total"`) {
		t.Errorf("plans list --json pagination: %s", envelope["pagination"])
	}
	for _, p := range japan {
		if !slices.Contains(p.Coverage.Countries, "JP") || p.Status != "active" || len(p.Prices) == 0 {
			t.Errorf("plan listed for JP: %+v", p)
		}
		for _, price := range p.Prices {
			if int64(price.Amount*100+0.5) != price.AmountMinor {
				t.Errorf("plan %s: amount %v disagrees with amount_minor %d", p.ID, price.Amount, price.AmountMinor)
			}
		}
		if (p.Type == "per_day") != (p.ValidityDays == nil) {
			t.Errorf("plan %s (%s): validity_days %v", p.ID, p.Type, p.ValidityDays)
		}
		if (p.Coverage.Scope == "region") != (p.Coverage.Region != nil && *p.Coverage.Region != "") {
			t.Errorf("plan %s (%s): region %v", p.ID, p.Coverage.Scope, p.Coverage.Region)
		}
	}
	// As the public API has it: a plan without a region says null, not
	// nothing.
	if !strings.Contains(string(envelope["data"]), `"region": null`) {
		t.Errorf("plans list --json: no plan shows \"region\": null:\n%.500s", envelope["data"])
	}

	var perDay []plan
	esimctl(t, env, "plans", "list", "--type", "per_day", "--json").ok(t).data(t, &perDay)
	for _, p := range perDay {
		if p.Type != "per_day" || !p.Data.Unlimited || p.Data.TotalBytes != nil {
			t.Errorf("per_day filter returned %+v", p)
		}
	}

	text := esimctl(t, env, "plans", "list", "--country", "JP").ok(t).stdout
	if !strings.HasPrefix(text, "ID ") || !strings.Contains(text, japan[0].ID) || !strings.Contains(text, " USD") {
		t.Errorf("plans list table:\n%s", text)
	}

	target := japan[0]
	if got := esimctl(t, env, "plans", "get", target.ID).ok(t).stdout; !strings.Contains(got, target.Name) || !strings.Contains(got, "active") {
		t.Errorf("plans get:\n%s", got)
	}

	var retired plan
	esimctl(t, env, "plans", "retire", target.ID, "--json").ok(t).data(t, &retired)
	if retired.ID != target.ID || retired.Status != "retired" {
		t.Errorf("retired plan = %+v", retired)
	}
	var after []plan
	esimctl(t, env, "plans", "list", "--country", "JP", "--limit", "100", "--json").ok(t).data(t, &after)
	for _, p := range after {
		if p.ID == target.ID {
			t.Errorf("retired plan %s is still listed", target.ID)
		}
	}
	if len(after) != len(japan)-1 {
		t.Errorf("after retiring one plan, %d JP plans listed, want %d", len(after), len(japan)-1)
	}
	// Operators can still look a retired plan up.
	var again plan
	esimctl(t, env, "plans", "get", target.ID, "--json").ok(t).data(t, &again)
	if again.Status != "retired" {
		t.Errorf("plans get after retire: %+v", again)
	}

	const unknownID = "0193e000-0000-7000-8000-000000000000"
	esimctl(t, env, "plans", "retire", unknownID).wantError(t, 1, "retire plan "+unknownID+": ")
	esimctl(t, env, "plans", "get", unknownID, "--json").wantError(t, 1, "get plan "+unknownID+": ")
}
